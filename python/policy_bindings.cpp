// The learner's side of dynamiccl_pg._C: its states as stats() shows them, its snapshots as a
// policy file holds them (written and read with the keys of policy_key, csrc/policy/learner.h),
// the engines' arm catalogs, and the per-head settings.
#include <c10/util/StringUtil.h>

#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.h"
#include "engines/cpu/arm_catalog.h"
#include "engines/nccl/arm_catalog.h"

namespace dynamiccl {
namespace bindings {
namespace {

namespace key = policy_key;

py::dict arm_stats_to_py(const ArmStats& a) {
  py::dict ad;
  ad["name"] = a.name;
  ad["calls"] = a.calls;
  ad["samples"] = a.samples;
  ad["regime_samples"] = a.regime_samples;
  ad["mean_us"] = a.mean_us;
  ad["median_us"] = a.median_us;
  ad["prior_us"] = a.prior_us;
  ad["prior_sigma"] = std::isnan(a.prior_sigma) ? py::object(py::none())
                                                : py::float_(a.prior_sigma);
  ad["center_us"] = a.center_us;
  ad["eliminated"] = a.eliminated;
  return ad;
}

// The same keys for a verdict event and for the state's last trial.
void add_evidence(py::dict& d, const TrialEvidence& e) {
  d["pairs"] = e.pairs;
  d["mean_delta_us"] = e.mean_delta_us;
  d["stderr_us"] = e.stderr_us;
}

py::dict state_stats_to_py(const StateStats& s) {
  py::dict d;
  d["state_id"] = s.state_id;
  d["role"] = role_name(s.role);
  d["op"] = op_name(s.op);
  d["size_bin"] = s.size_bin;
  d["exposure"] = exposure_name(s.exposure);
  d["fused"] = s.fused;
  const auto name_of = [&](uint16_t arm) {
    for (const ArmStats& a : s.arms) {
      if (a.arm == arm) return a.name;
    }
    return std::string("?");
  };
  d["incumbent"] = name_of(s.incumbent);
  d["phase"] = s.phase;
  d["calls"] = s.calls;
  d["probes"] = s.probes;
  d["probes_to_converge"] = s.probes_to_converge;
  d["alarms"] = s.alarms;
  d["frozen"] = s.frozen;
  d["converged_at_call"] = s.converged_at_call;
  d["measured_calls"] = s.measured_calls;
  d["extra_us"] = s.extra_us;
  d["budget_us"] = s.budget_us;
  d["reference_us"] = s.reference_us;
  if (s.assumed_channels > 0) {  // an engine whose arms hold channels (NCCL)
    d["assumed_channels"] = s.assumed_channels;
    d["nccl_channels"] = s.nccl_channels;
  }
  py::list events;
  for (const auto& e : s.events) {
    py::dict ed;
    ed["call"] = e.call;
    ed["step"] = e.step;
    ed["what"] = e.what;
    ed["from"] = name_of(e.from_arm);
    ed["to"] = name_of(e.to_arm);
    if (e.trial.pairs > 0) add_evidence(ed, e.trial);
    events.append(ed);
  }
  d["events"] = events;
  py::list arms;
  for (const auto& a : s.arms) arms.append(arm_stats_to_py(a));
  d["arms"] = arms;
  if (!s.trial.verdict.empty()) {
    py::dict t;
    t["challenger"] = s.trial.challenger;
    add_evidence(t, s.trial);
    t["verdict"] = s.trial.verdict;
    d["step_trial"] = t;
  }
  return d;
}

// Reading a snapshot (one engine's part of a policy file) for restore(). Policy files are checked
// whole, naming the file, by dynamiccl_pg/policy_schema.py before anything is restored; these
// checks guard restore() itself: a bad value is refused with its key path and what is accepted.
[[noreturn]] void refuse(const std::string& path, const py::handle& value,
                         const std::string& accepted) {
  TORCH_CHECK_VALUE(false, "dynamiccl: policy snapshot ", path, "=",
                    py::repr(value).cast<std::string>(), " is not accepted; accepted: ", accepted);
}

py::object field(const py::handle& d, const char* key, const std::string& path) {
  if (!py::isinstance<py::dict>(d)) refuse(path, d, "an object");
  auto dict = py::reinterpret_borrow<py::dict>(d);
  TORCH_CHECK_VALUE(dict.contains(key), "dynamiccl: policy snapshot ", path, " has no key '", key,
                    "'");
  return dict[key];
}

// The key path of `key` in the object at `path`.
std::string at_key(const std::string& path, const char* key) { return path + "." + key; }

template <typename T>
T typed(const py::object& v, const std::string& path, const std::string& accepted) {
  const bool is_int = PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr());
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>) ok = PyBool_Check(v.ptr());
  if constexpr (std::is_same_v<T, std::string>) ok = py::isinstance<py::str>(v);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) ok = is_int;
  if constexpr (std::is_floating_point_v<T>) ok = is_int || PyFloat_Check(v.ptr());
  if (!ok) refuse(path, v, accepted);
  try {
    return v.cast<T>();
  } catch (const py::cast_error&) {
    refuse(path, v, accepted);  // out of T's range
  }
}

// The value of `key` in the object at `path`, of type T.
template <typename T>
T typed_field(const py::handle& d, const char* key, const std::string& path,
              const std::string& accepted) {
  return typed<T>(field(d, key, path), at_key(path, key), accepted);
}

template <typename E>
E named(const py::object& v, const std::string& path, NameList names) {
  E out;
  if (!parse_name(names, typed<std::string>(v, path, names.joined()), &out)) {
    refuse(path, v, names.joined());
  }
  return out;
}

double cost(const py::handle& d, const char* key, const std::string& path) {
  const py::object v = field(d, key, path);
  const double x = typed<double>(v, at_key(path, key), "a finite number >= 0");
  if (!(std::isfinite(x) && x >= 0)) refuse(at_key(path, key), v, "a finite number >= 0");
  return x;
}

std::string arm_name(const py::handle& d, const char* key, const std::string& path,
                     const ArmCatalog& catalog, OpKind op) {
  std::vector<std::string> names;
  for (const Arm& a : catalog.arms(op)) names.push_back(a.name);
  const std::string accepted = std::string("an arm of ") + op_name(op) + ": " +
                               c10::Join(", ", names);
  const py::object v = field(d, key, path);
  const auto name = typed<std::string>(v, at_key(path, key), accepted);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    refuse(at_key(path, key), v, accepted);
  }
  return name;
}

ArmSnapshot arm_snapshot_from_py(const py::handle& a, const std::string& at,
                                 const ArmCatalog& catalog, OpKind op) {
  // Braced initialization: the keys are read (and refused) in the order listed.
  return ArmSnapshot{arm_name(a, key::kName, at, catalog, op),
                     typed_field<uint64_t>(a, key::kSamples, at, "an integer >= 0"),
                     cost(a, key::kMeanUs, at),
                     cost(a, key::kM2, at),
                     cost(a, key::kAnalyticUs, at),
                     typed_field<bool>(a, key::kEliminated, at, "true, false"),
                     typed_field<bool>(a, key::kStepAdopted, at, "true, false"),
                     typed_field<bool>(a, key::kStepRejected, at, "true, false")};
}

StateSnapshot state_snapshot_from_py(const py::handle& s, const std::string& at,
                                     const ArmCatalog& catalog) {
  StateSnapshot st;
  st.role = named<Role>(field(s, key::kRole, at), at_key(at, key::kRole), role_names());
  st.op = named<OpKind>(field(s, key::kOp, at), at_key(at, key::kOp), op_names());
  const auto bin = field(s, key::kSizeBin, at);
  st.size_bin = typed<int>(bin, at_key(at, key::kSizeBin), "an integer");
  if (st.size_bin < 0 || st.size_bin >= kNumSizeBins) {
    refuse(at_key(at, key::kSizeBin), bin, "0.." + std::to_string(kNumSizeBins - 1));
  }
  st.exposure = named<Exposure>(field(s, key::kExposure, at), at_key(at, key::kExposure),
                                exposure_names());
  st.fused = typed_field<bool>(s, key::kFused, at, "true, false");
  st.incumbent = arm_name(s, key::kIncumbent, at, catalog, st.op);
  st.converged = typed_field<bool>(s, key::kConverged, at, "true, false");
  const py::object arms = field(s, key::kArms, at);
  if (!py::isinstance<py::list>(arms)) refuse(at_key(at, key::kArms), arms, "a list");
  int j = 0;
  for (const auto& a : arms) {
    const std::string arm = at_key(at, key::kArms) + "[" + std::to_string(j++) + "]";
    st.arms.push_back(arm_snapshot_from_py(a, arm, catalog, st.op));
  }
  return st;
}

std::vector<std::string> key_list(const char* const* keys, size_t n) {
  return std::vector<std::string>(keys, keys + n);
}

template <size_t N>
std::vector<std::string> key_list(const std::array<const char*, N>& keys) {
  return key_list(keys.data(), N);
}

void bind_heads(py::module_& m) {
  m.def(
      "head_settings",
      [] {
        py::list out;
        for (const HeadSetting& s : head_settings()) {
          py::dict d;
          d["name"] = s.name;
          d["integer"] = s.integer != nullptr;
          d["min"] = s.min;
          d["max"] = s.max;
          d["min_open"] = s.min_open;
          d["range"] = s.range();
          d["doc"] = s.doc;
          out.append(d);
        }
        return out;
      },
      "The learner's per-head settings: name, range and meaning (DYNAMICCL_HEADS keys).");
  m.def(
      "default_heads",
      [] {
        py::dict out;
        const auto heads = LearnerConfig::default_heads();
        for (int r = 0; r < kNumRoles; ++r) {
          py::dict d;
          for (const HeadSetting& s : head_settings()) d[s.name] = s.get(heads[r]);
          out[role_name(static_cast<Role>(r))] = d;
        }
        return out;
      },
      "Every role head's default settings.");
}

void bind_arms(py::module_& m) {
  m.def(
      "nccl_arm_uncapped",
      [](const std::string& name) {
        Action a;
        TORCH_CHECK_VALUE(
            parse_nccl_arm_name(name, &a), "dynamiccl: '", name,
            "' is not an NCCL arm name: accepted: ALGO/PROTO, optionally /cN and /kNK");
        return nccl_arm_name(a.algo, a.proto, 0, std::max(0, a.chunk_bytes));
      },
      py::arg("name"),
      "The NCCL arm `name` without its channel cap (the arm a cap at or above its channels runs).");
  m.def(
      "is_nccl_arm_name",
      [](const std::string& name) {
        Action action;
        return parse_nccl_arm_name(name, &action);
      },
      py::arg("name"),
      "Whether `name` has the form of an NCCL arm (ALGO/PROTO, optionally /cN and /kNK); whether a "
      "group "
      "offers it depends on the group's topology (arm_names).");
  m.def(
      "arm_names",
      [](EngineKind engine, const std::string& op, const py::object& topology, int nccl_version) {
        if (engine == EngineKind::kCpu) return arm_names(CpuArmCatalog(), op);
        const nccl::TopologySpec spec = topology.is_none()
                                            ? nccl::TopologySpec{}
                                            : topology_from_py(topology.cast<py::dict>());
        return arm_names(nccl_catalog_for(nccl::resolve_topology(spec),
                                          nccl::GroupShape{spec.nodes, spec.gpus_per_node}, {},
                                          true, nccl_version),
                         op);
      },
      py::arg("engine"), py::arg("op"), py::arg("topology") = py::none(),
      py::arg("nccl_version") = 0,
      "The arms an engine offers for an op (the first is the engine default); NCCL's depend on "
      "the topology (a dict as dynamiccl_pg.topology describes it; default: one node of eight "
      "Hopper GPUs on NVLink); chunk-size arms need nccl_version (NCCL_VERSION_CODE) >= 23000.");
}

}  // namespace

std::vector<std::string> arm_names(const ArmCatalog& cat, const std::string& op_str) {
  const auto op = parse_or_throw<OpKind>(op_names(), op_str, "op");
  std::vector<std::string> names;
  for (const auto& a : cat.arms(op)) names.push_back(a.name);
  return names;
}

py::list stats_to_py(const Learner& learner) {
  py::list out;
  for (const auto& s : learner.stats()) out.append(state_stats_to_py(s));
  return out;
}

py::dict snapshot_to_py(const PolicySnapshot& snap) {
  py::list states;
  for (const auto& s : snap.states) {
    py::dict d;
    d[key::kRole] = role_name(s.role);
    d[key::kOp] = op_name(s.op);
    d[key::kSizeBin] = s.size_bin;
    d[key::kExposure] = exposure_name(s.exposure);
    d[key::kFused] = s.fused;
    d[key::kIncumbent] = s.incumbent;
    d[key::kConverged] = s.converged;
    py::list arms;
    for (const auto& a : s.arms) {
      py::dict ad;
      ad[key::kName] = a.name;
      ad[key::kSamples] = a.samples;
      ad[key::kMeanUs] = a.mean_us;
      ad[key::kM2] = a.m2;
      ad[key::kAnalyticUs] = a.analytic_us;
      ad[key::kEliminated] = a.eliminated;
      ad[key::kStepAdopted] = a.step_adopted;
      ad[key::kStepRejected] = a.step_rejected;
      arms.append(ad);
    }
    d[key::kArms] = arms;
    states.append(d);
  }
  py::dict out;
  out[key::kStates] = states;
  return out;
}

PolicySnapshot snapshot_from_py(const py::dict& d, const ArmCatalog& catalog) {
  PolicySnapshot snap;
  const py::object states = field(d, key::kStates, "snapshot");
  if (!py::isinstance<py::list>(states)) refuse(key::kStates, states, "a list");
  int i = 0;
  for (const auto& s : states) {
    const std::string at = std::string(key::kStates) + "[" + std::to_string(i++) + "]";
    snap.states.push_back(state_snapshot_from_py(s, at, catalog));
  }
  return snap;
}

}  // namespace bindings

void bind_policy(py::module_& m) {
  bindings::bind_arms(m);
  bindings::bind_heads(m);
  m.def(
      "policy_keys",
      [] {
        namespace key = policy_key;
        py::dict out;
        out["file"] = bindings::key_list(key::kFile);
        out["group"] = bindings::key_list(key::kGroup);
        out["snapshot"] = bindings::key_list(key::kSnapshot);
        out["state"] = bindings::key_list(key::kState);
        out["arm"] = bindings::key_list(key::kArm);
        return out;
      },
      "The keys of a policy file's objects, by level (file, group, snapshot, state, arm): every "
      "one required, in the order messages name them.");
}

}  // namespace dynamiccl
