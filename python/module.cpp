// dynamiccl_pg._C: binds the C++ core into Python. Registration of the backend happens in
// dynamiccl_pg/__init__.py at import (never at library load).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include <c10/util/StringUtil.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <tuple>

#include "backend/hint_scope.h"
#include "backend/process_group_dynamiccl.h"
#include "engines/cpu/arm_catalog.h"
#include "engines/nccl/arm_catalog.h"
#include "nccl_plugin/dynamiccl_nccl.h"
#include "nccl_model/cost_model.h"

namespace py = pybind11;

namespace dynamiccl {

void bind_sim(py::module_& m);             // python/sim_bindings.cpp
void bind_emulated_nccl(py::module_& m);  // python/emulated_nccl_bindings.cpp

namespace {

// Holder that drops the GIL while the backend is destroyed: its destructor joins engine threads
// whose completion callbacks may need the GIL (Python comm hooks), which would deadlock.
template <typename T>
class NoGilDestructorPtr {
 public:
  NoGilDestructorPtr() = default;
  NoGilDestructorPtr(const NoGilDestructorPtr&) = default;
  NoGilDestructorPtr(NoGilDestructorPtr&&) noexcept = default;
  NoGilDestructorPtr& operator=(const NoGilDestructorPtr&) = default;
  NoGilDestructorPtr& operator=(NoGilDestructorPtr&&) noexcept = default;
  /* implicit */ NoGilDestructorPtr(c10::intrusive_ptr<T> p) : p_(std::move(p)) {}
  explicit NoGilDestructorPtr(T* raw) : p_(c10::intrusive_ptr<T>::unsafe_steal_from_new(raw)) {}
  ~NoGilDestructorPtr() {
    if (p_ && PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      p_.reset();
    }
  }
  T& operator*() const noexcept { return *p_; }
  T* operator->() const noexcept { return p_.get(); }
  T* get() const noexcept { return p_.get(); }

 private:
  c10::intrusive_ptr<T> p_;
};

}  // namespace
}  // namespace dynamiccl

PYBIND11_DECLARE_HOLDER_TYPE(T, dynamiccl::NoGilDestructorPtr<T>, true)

namespace dynamiccl {
namespace {

using PG = ProcessGroupDynamicCCL;

c10::intrusive_ptr<c10d::Backend> as_backend(const py::object& obj) {
  if (obj.is_none()) return {};
  auto* raw = obj.cast<c10d::Backend*>();
  return c10::intrusive_ptr<c10d::Backend>::reclaim_copy(raw);
}

// split()'s creator: a Python callable (dynamiccl_pg.backend's) held so that it is released
// under the GIL, whichever thread drops the last reference.
PG::SplitFactory python_split_factory(py::object fn) {
  std::shared_ptr<py::object> held(new py::object(std::move(fn)), [](py::object* o) {
    if (!Py_IsInitialized()) return;  // at exit: leak rather than touch a finalized interpreter
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held](const PG::SplitRequest& r) -> c10::intrusive_ptr<c10d::Backend> {
    py::gil_scoped_acquire gil;
    py::object child = (*held)(r.store, r.ranks, r.parent_rank, r.timeout, r.group_name,
                               r.group_desc);
    return as_backend(child);
  };
}

template <typename T>
T get_or(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

template <typename E>
E parse_or_throw(NameList names, const std::string& value, const char* what) {
  E out;
  TORCH_CHECK_VALUE(parse_name(names, value, &out), "dynamiccl: unknown ", what, " '", value,
                    "'; accepted: ", names.joined());
  return out;
}

nccl::LinkSpec link_from_py(const py::dict& d) {
  return nccl::LinkSpec{d["type"].cast<std::string>(), d["bw_GBps"].cast<double>(),
                        get_or<double>(d, "lat_us", 0.0)};
}

// A TopologySpec from its dict form (dynamiccl_pg/topology.py); resolve_topology checks it.
nccl::TopologySpec topology_from_py(const py::dict& d) {
  nccl::TopologySpec t;
  t.nodes = d["nodes"].cast<int>();
  t.gpus_per_node = d["gpus_per_node"].cast<int>();
  t.gpu = d["gpu"].cast<std::string>();
  t.cpu = get_or<std::string>(d, "cpu", t.cpu);
  t.intra = link_from_py(d["intra"].cast<py::dict>());
  t.inter = link_from_py(d["inter"].cast<py::dict>());
  t.nvswitch = get_or<bool>(d, "nvswitch", t.nvswitch);
  t.sharp = get_or<bool>(d, "sharp", t.sharp);
  t.channels = get_or<int>(d, "channels", t.channels);
  return t;
}

py::dict link_to_py(const nccl::LinkSpec& l) {
  py::dict d;
  d["type"] = l.type;
  d["bw_GBps"] = l.bw_GBps;
  d["lat_us"] = l.lat_us;
  return d;
}

py::dict topology_to_py(const nccl::TopologySpec& t) {
  py::dict d;
  d["nodes"] = t.nodes;
  d["gpus_per_node"] = t.gpus_per_node;
  d["gpu"] = t.gpu;
  d["cpu"] = t.cpu;
  d["intra"] = link_to_py(t.intra);
  d["inter"] = link_to_py(t.inter);
  d["nvswitch"] = t.nvswitch;
  d["sharp"] = t.sharp;
  d["channels"] = t.channels;
  return d;
}

int parse_gpu(const std::string& gpu) {
  int compcap = 0;
  if (!nccl::parse_compcap(gpu, &compcap))
    throw py::value_error("gpu '" + gpu + "' is not accepted; accepted: " +
                          join_names(nccl::compcap_names()));
  return compcap;
}

// The Python side (dynamiccl_pg/config.py) validates every value with a message naming it; these
// checks only guard the boundary.
BackendConfig config_from_dict(const py::dict& d) {
  BackendConfig c;
  c.mode = parse_or_throw<Mode>(mode_names(), get_or<std::string>(d, "mode", "learn"), "mode");
  c.round_calls = get_or<int>(d, "round_calls", c.round_calls);
  c.cost_reduce = parse_or_throw<CostReduce>(
      cost_reduce_names(), get_or<std::string>(d, "cost_reduce", "auto"), "cost_reduce");
  c.force = get_or<std::map<std::string, std::string>>(d, "force", {});
  for (const auto& [desc, role] : get_or<std::map<std::string, std::string>>(d, "role_map", {})) {
    c.role_map[desc] = parse_or_throw<Role>(role_names(), role, "role");
  }
  c.decision_log_capacity = get_or<size_t>(d, "decision_log", c.decision_log_capacity);
  c.trace = get_or<bool>(d, "trace", false);
  c.check_calls = get_or<bool>(d, "check_calls", false);
  c.nccl_tuning = get_or<bool>(d, "nccl_tuning", true);
  c.nccl_emulated = get_or<bool>(d, "nccl_emulated", false);
  if (d.contains("test_slow_arm") && !d["test_slow_arm"].is_none()) {
    std::tie(c.test_slow_arm, c.test_slow_arm_us) =
        d["test_slow_arm"].cast<std::tuple<std::string, int>>();
  }
  if (d.contains("nccl_topology")) {
    c.nccl_topology = topology_from_py(d["nccl_topology"].cast<py::dict>());
    c.nccl_group = nccl::GroupShape{c.nccl_topology.nodes, c.nccl_topology.gpus_per_node};
  }
  // Head settings: (role or "all", key, value); keys and ranges are the learner's table.
  for (const auto& [role, key, value] :
       get_or<std::vector<std::tuple<std::string, std::string, double>>>(d, "heads", {})) {
    try {
      if (role == "all") {
        for (HeadConfig& h : c.learner.heads) set_head_setting(h, key, value);
      } else {
        set_head_setting(c.learner.heads[static_cast<int>(
                             parse_or_throw<Role>(role_names(), role, "role"))],
                         key, value);
      }
    } catch (const std::invalid_argument& e) {
      TORCH_CHECK_VALUE(false, "dynamiccl: ", role, ".", e.what());
    }
  }
  c.learner.step_regression = get_or<double>(d, "step_regression", c.learner.step_regression);
  c.learner.loss_stall_rounds = get_or<int>(d, "loss_stall_rounds", c.learner.loss_stall_rounds);
  return c;
}

py::list stats_to_py(const Learner& learner) {
  py::list out;
  for (const auto& s : learner.stats()) {
    py::dict d;
    d["state_id"] = s.state_id;
    d["role"] = role_name(s.role);
    d["op"] = op_name(s.op);
    d["size_bin"] = s.size_bin;
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
    d["alarms"] = s.alarms;
    d["frozen"] = s.frozen;
    d["converged_at_call"] = s.converged_at_call;
    d["measured_calls"] = s.measured_calls;
    d["extra_us"] = s.extra_us;
    d["budget_us"] = s.budget_us;
    py::list events;
    for (const auto& e : s.events) {
      py::dict ed;
      ed["call"] = e.call;
      ed["what"] = e.what;
      ed["from"] = name_of(e.from_arm);
      ed["to"] = name_of(e.to_arm);
      events.append(ed);
    }
    d["events"] = events;
    py::list arms;
    for (const auto& a : s.arms) {
      py::dict ad;
      ad["name"] = a.name;
      ad["calls"] = a.calls;
      ad["samples"] = a.samples;
      ad["mean_us"] = a.mean_us;
      ad["median_us"] = a.median_us;
      ad["center_us"] = a.center_us;
      ad["eliminated"] = a.eliminated;
      arms.append(ad);
    }
    d["arms"] = arms;
    out.append(d);
  }
  return out;
}

py::dict snapshot_to_py(const PolicySnapshot& snap) {
  py::list states;
  for (const auto& s : snap.states) {
    py::dict d;
    d["role"] = role_name(s.role);
    d["op"] = op_name(s.op);
    d["size_bin"] = s.size_bin;
    d["incumbent"] = s.incumbent;
    d["converged"] = s.converged;
    py::list arms;
    for (const auto& a : s.arms) {
      py::dict ad;
      ad["name"] = a.name;
      ad["samples"] = a.samples;
      ad["mean_us"] = a.mean_us;
      ad["m2"] = a.m2;
      ad["eliminated"] = a.eliminated;
      arms.append(ad);
    }
    d["arms"] = arms;
    states.append(d);
  }
  py::dict out;
  out["states"] = states;
  return out;
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

template <typename E>
E named(const py::object& v, const std::string& path, NameList names) {
  E out;
  if (!parse_name(names, typed<std::string>(v, path, names.joined()), &out)) {
    refuse(path, v, names.joined());
  }
  return out;
}

double cost(const py::object& v, const std::string& path) {
  const double x = typed<double>(v, path, "a finite number >= 0");
  if (!(std::isfinite(x) && x >= 0)) refuse(path, v, "a finite number >= 0");
  return x;
}

std::string arm_name(const py::object& v, const std::string& path, const ArmCatalog& catalog,
                     OpKind op) {
  std::vector<std::string> names;
  for (const Arm& a : catalog.arms(op)) names.push_back(a.name);
  const std::string accepted = std::string("an arm of ") + op_name(op) + ": " +
                               c10::Join(", ", names);
  const auto name = typed<std::string>(v, path, accepted);
  if (std::find(names.begin(), names.end(), name) == names.end()) refuse(path, v, accepted);
  return name;
}

PolicySnapshot snapshot_from_py(const py::dict& d, const ArmCatalog& catalog) {
  PolicySnapshot snap;
  const py::object states = field(d, "states", "snapshot");
  if (!py::isinstance<py::list>(states)) refuse("states", states, "a list");
  int i = 0;
  for (const auto& s : states) {
    const std::string at = "states[" + std::to_string(i++) + "]";
    StateSnapshot st;
    st.role = named<Role>(field(s, "role", at), at + ".role", role_names());
    st.op = named<OpKind>(field(s, "op", at), at + ".op", op_names());
    const auto bin = field(s, "size_bin", at);
    st.size_bin = typed<int>(bin, at + ".size_bin", "an integer");
    if (st.size_bin < 0 || st.size_bin >= kNumSizeBins) {
      refuse(at + ".size_bin", bin, "0.." + std::to_string(kNumSizeBins - 1));
    }
    st.incumbent = arm_name(field(s, "incumbent", at), at + ".incumbent", catalog, st.op);
    st.converged = typed<bool>(field(s, "converged", at), at + ".converged", "true, false");
    const py::object arms = field(s, "arms", at);
    if (!py::isinstance<py::list>(arms)) refuse(at + ".arms", arms, "a list");
    int j = 0;
    for (const auto& a : arms) {
      const std::string arm = at + ".arms[" + std::to_string(j++) + "]";
      st.arms.push_back(ArmSnapshot{
          arm_name(field(a, "name", arm), arm + ".name", catalog, st.op),
          typed<uint64_t>(field(a, "samples", arm), arm + ".samples", "an integer >= 0"),
          cost(field(a, "mean_us", arm), arm + ".mean_us"), cost(field(a, "m2", arm), arm + ".m2"),
          typed<bool>(field(a, "eliminated", arm), arm + ".eliminated", "true, false")});
    }
    snap.states.push_back(std::move(st));
  }
  return snap;
}

py::list summary_to_py(const PG& pg) {
  py::list out;
  const Telemetry& t = pg.telemetry();
  for (int e = 0; e < kNumEngines; ++e) {
    const auto engine = static_cast<EngineKind>(e);
    for (int o = 0; o < kNumOps; ++o) {
      for (int b = 0; b < kNumSizeBins; ++b) {
        const SummaryCell& c = t.summary(engine, static_cast<OpKind>(o), b);
        const uint64_t calls = c.calls.load();
        if (!calls) continue;
        const uint64_t timed = c.timed.load();
        py::dict d;
        d["engine"] = engine_name(engine);
        d["op"] = op_name(static_cast<OpKind>(o));
        d["size_bin"] = b;
        d["calls"] = calls;
        d["bytes"] = c.bytes.load();
        d["timed"] = timed;
        d["mean_us"] = timed ? c.sum_ns.load() / 1e3 / timed : -1.0;
        out.append(d);
      }
    }
  }
  return out;
}

std::vector<std::string> arm_names(const ArmCatalog& cat, const std::string& op_str) {
  const auto op = parse_or_throw<OpKind>(op_names(), op_str, "op");
  std::vector<std::string> names;
  for (const auto& a : cat.arms(op)) names.push_back(a.name);
  return names;
}

std::vector<std::string> to_vector(NameList names) {
  return std::vector<std::string>(names.names, names.names + names.count);
}

py::tuple record_to_py(const CallRecord& r) {
  return py::make_tuple(r.seq, op_name(r.op), r.bytes, r.state_id, r.arm, r.epoch,
                        engine_name(r.engine), r.probe, r.forced);
}

std::string loaded_plugin_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&dynamiccl_nccl_publish), &info) && info.dli_fname) {
    return info.dli_fname;
  }
  return "";
}

}  // namespace
}  // namespace dynamiccl

PYBIND11_MODULE(_C, m) {
  using namespace dynamiccl;
  m.doc() = "DynamICCL core: the c10d backend, the learner and the simulator";
  m.attr("built_for_torch") = DYNAMICCL_BUILT_FOR_TORCH;  // checked against torch at import

  py::enum_<EngineKind>(m, "Engine", "The engines a group runs calls on.")
      .value("cpu", EngineKind::kCpu)
      .value("nccl", EngineKind::kNccl);

  auto backend_base = py::module_::import("torch._C._distributed_c10d").attr("Backend");
  py::class_<PG, NoGilDestructorPtr<PG>>(m, "ProcessGroupDynamicCCL", backend_base,
                                         py::dynamic_attr())
      .def(py::init([](int rank, int size, const py::object& gloo, const py::object& control,
                       const py::object& nccl, const py::dict& config,
                       std::chrono::milliseconds timeout) {
             PG::Engines engines{as_backend(gloo), as_backend(control), as_backend(nccl)};
             auto cfg = config_from_dict(config);
             py::gil_scoped_release no_gil;
             return c10::make_intrusive<PG>(rank, size, std::move(engines), std::move(cfg),
                                            timeout);
           }),
           py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("control"),
           py::arg("nccl"), py::arg("config"), py::arg("timeout"))
      .def_property_readonly("mode", [](const PG& pg) { return mode_name(pg.mode()); })
      .def_property_readonly("group_role", [](PG& pg) { return role_name(pg.group_role()); })
      .def_property_readonly("group_desc", [](const PG& pg) { return pg.getGroupDesc(); })
      .def_property_readonly("learned_calls", &PG::learned_calls)
      .def_property_readonly("rounds_applied", &PG::rounds_applied)
      .def_property_readonly("nccl_tuning_active", &PG::nccl_tuning_active)
      .def("has_engine", [](const PG& pg, EngineKind e) { return pg.catalog(e) != nullptr; })
      .def("stats",
           [](const PG& pg, EngineKind engine) -> py::object {
             const Learner* l = pg.learner(engine);
             return l ? py::object(stats_to_py(*l)) : py::object(py::list());
           })
      .def("arms",
           [](const PG& pg, EngineKind engine, const std::string& op) {
             const ArmCatalog* c = pg.catalog(engine);
             return c ? arm_names(*c, op) : std::vector<std::string>{};
           })
      .def("epoch",
           [](const PG& pg, EngineKind engine) {
             const Learner* l = pg.learner(engine);
             return l ? l->epoch() : 0u;
           })
      .def("decision_log",
           [](const PG& pg) {
             py::list out;
             for (const auto& r : pg.telemetry().decision_log()) out.append(record_to_py(r));
             return out;
           })
      .def("decision_hash", [](const PG& pg) { return pg.telemetry().decision_hash(); })
      .def("decisions_logged", [](const PG& pg) { return pg.telemetry().decisions_logged(); })
      .def("call_summary", &summary_to_py)
      .def("trace_records",
           [](const PG& pg) {
             py::list out;
             for (const auto& t : pg.telemetry().traces()) {
               const CallRecord& r = t.record;
               out.append(py::make_tuple(r.seq, op_name(r.op), r.bytes, engine_name(r.engine),
                                         role_name(r.role), r.arm, r.probe, r.learned, r.epoch,
                                         r.start_ns, t.end_ns.load()));
             }
             return out;
           })
      .def("add_step_time", &PG::add_step_time)
      .def("add_loss", &PG::add_loss)
      .def("snapshot",
           [](PG& pg, EngineKind engine) -> py::object {
             const Learner* l = pg.learner(engine);
             return l ? py::object(snapshot_to_py(l->snapshot())) : py::object(py::none());
           })
      .def("restore", [](PG& pg, EngineKind engine, const py::dict& snap) {
        const ArmCatalog* catalog = pg.catalog(engine);
        TORCH_CHECK_VALUE(catalog, "dynamiccl: the ", engine_name(engine),
                          " engine is not available in this group");
        pg.mutable_learner(engine)->restore(snapshot_from_py(snap, *catalog));
      })
      .def("set_split_factory",
           [](PG& pg, py::object fn) { pg.set_split_factory(python_split_factory(std::move(fn))); },
           "The creator split() calls: fn(store, ranks, parent_rank, timeout, name, desc).")
      .def_property_readonly("shut_down", &PG::is_shut_down,
                             "True once the group was destroyed (shutdown() or abort()).");

  m.def("set_hint", [](int role, int bucket, int is_last, int stage, int direction, int priority) {
    set_current_hint(Hint{role, bucket, is_last, stage, direction, priority});
  });
  m.def("get_hint", [] {
    const Hint& h = current_hint();
    return py::make_tuple(h.role, h.bucket, h.is_last, h.stage, h.direction, h.priority);
  });
  m.def("vocabulary", [] {
    py::dict v;
    v["ops"] = to_vector(op_names());
    v["roles"] = to_vector(role_names());
    v["modes"] = to_vector(mode_names());
    v["engines"] = to_vector(engine_names());
    v["cost_reductions"] = to_vector(cost_reduce_names());
    std::vector<std::string> algos, protos;
    for (int a = 0; a < nccl::kNumAlgos; ++a) algos.push_back(nccl::algo_name(a));
    for (int p = 0; p < nccl::kNumProtos; ++p) protos.push_back(nccl::proto_name(p));
    v["nccl_algos"] = algos;
    v["nccl_protos"] = protos;
    v["nccl_max_channels"] = DYNAMICCL_NCCL_MAX_CHANNELS;
    v["size_bins"] = kNumSizeBins;
    v["gpus"] = nccl::compcap_names();
    v["cpus"] = nccl::cpu_names();
    v["intra_links"] = nccl::link_type_names(true);
    v["inter_links"] = nccl::link_type_names(false);
    return v;
  }, "Every name list the core defines (ops, roles, modes, engines, ...), indexed by value.");
  m.def("size_bin", &size_bin, "The learner's size bin of a byte count.");
  m.def(
      "is_nccl_arm_name",
      [](const std::string& name) {
        Action action;
        return parse_nccl_arm_name(name, &action);
      },
      py::arg("name"),
      "Whether `name` has the form of an NCCL arm (ALGO/PROTO or ALGO/PROTO/cN); whether a group "
      "offers it depends on the group's topology (arm_names).");
  m.def(
      "nccl_predict",
      [](const py::dict& topology, const std::string& op_str, uint64_t bytes) {
        // NCCL's cost model (the NCCL prior) of the described communicator: per arm, its time.
        const nccl::TopologySpec spec = topology_from_py(topology);
        const NcclArmCatalog cat = nccl_catalog_for(
            nccl::resolve_topology(spec), nccl::GroupShape{spec.nodes, spec.gpus_per_node});
        const auto op = parse_or_throw<OpKind>(op_names(), op_str, "op");
        py::dict out;
        const auto& arms = cat.arms(op);
        for (size_t a = 0; a < arms.size(); ++a) {
          out[py::str(arms[a].name)] = cat.model().predict_us(op, arms[a].action, bytes);
        }
        int algo = -1, proto = -1;
        if (nccl::func_of(op) >= 0 && cat.model().pick(nccl::func_of(op), bytes, &algo, &proto)) {
          out["default"] = py::str(nccl_arm_name(algo, proto, 0));
        }
        return out;
      },
      py::arg("topology"), py::arg("op"), py::arg("bytes"),
      "NCCL's modelled time (us) of every arm of `op` at `bytes` on the described communicator "
      "(a topology dict as dynamiccl_pg.topology describes it); 'default' names NCCL's pick.");
  m.def(
      "described_topology",
      [](int nodes, int gpus_per_node, const std::string& gpu, bool pcie) {
        return topology_to_py(nccl::described_topology(nodes, gpus_per_node, parse_gpu(gpu), pcie));
      },
      py::arg("nodes"), py::arg("gpus_per_node"), py::arg("gpu"), py::arg("pcie"),
      "The topology a group describes from what its ranks see, links at their assumed bandwidths.");
  m.def(
      "assumed_bw_GBps",
      [](const std::string& link, const std::string& gpu) {
        nccl::LinkType type;
        if (!nccl::parse_link_type(link, &type))
          throw py::value_error("link '" + link + "' is not accepted; accepted: " +
                                join_names(nccl::link_type_names(true)) + ", " +
                                join_names(nccl::link_type_names(false)));
        return nccl::assumed_bw_GBps(type, parse_gpu(gpu));
      },
      py::arg("link"), py::arg("gpu"),
      "Per-GPU bandwidth (GB/s) assumed for a link of this type on this GPU generation.");
  m.def("head_settings", [] {
    py::list out;
    const HeadConfig defaults;
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
  }, "The learner's per-head settings: name, range and meaning (DYNAMICCL_HEADS keys).");
  m.def("default_heads", [] {
    py::dict out;
    const auto heads = LearnerConfig::default_heads();
    for (int r = 0; r < kNumRoles; ++r) {
      py::dict d;
      for (const HeadSetting& s : head_settings()) d[s.name] = s.get(heads[r]);
      out[role_name(static_cast<Role>(r))] = d;
    }
    return out;
  }, "Every role head's default settings.");
  m.def(
      "arm_names",
      [](EngineKind engine, const std::string& op, const py::object& topology) {
        if (engine == EngineKind::kCpu) return arm_names(CpuArmCatalog(), op);
        const nccl::TopologySpec spec =
            topology.is_none() ? nccl::TopologySpec{} : topology_from_py(topology.cast<py::dict>());
        return arm_names(nccl_catalog_for(nccl::resolve_topology(spec),
                                          nccl::GroupShape{spec.nodes, spec.gpus_per_node}),
                         op);
      },
      py::arg("engine"), py::arg("op"), py::arg("topology") = py::none(),
      "The arms an engine offers for an op (the first is the engine default); NCCL's depend on "
      "the topology (a dict as dynamiccl_pg.topology describes it; default: one node of eight "
      "Hopper GPUs on NVLink).");
  m.def("nccl_plugin_path", &loaded_plugin_path,
        "Path of the tuner plugin library this module is linked with (give NCCL this one).");
  m.def("nccl_counters", [] {
    dynamiccl_nccl_counters c{};
    dynamiccl_nccl_get_counters(&c);
    py::dict d;
    d["applied"] = c.applied;
    d["abstained"] = c.abstained;
    d["unavailable"] = c.unavailable;
    d["mismatched"] = c.mismatched;
    d["init_calls"] = c.init_calls;
    d["abi_version"] = c.abi_version;
    d["chunk_size_calls"] = c.chunk_size_calls;
    d["active_comms"] = c.active_comms;
    d["loaded_by_nccl"] = dynamiccl_nccl_loaded_by_nccl() != 0;
    d["profiler_loaded_by_nccl"] = dynamiccl_nccl_profiler_loaded_by_nccl() != 0;
    return d;
  });
  m.def("nccl_profiler_records", [](uint64_t after_id) {
    std::vector<dynamiccl_nccl_coll_record> recs(DYNAMICCL_NCCL_PROFILER_RING_SIZE);
    recs.resize(dynamiccl_nccl_profiler_read(after_id, recs.data(), recs.size()));
    py::list out;
    for (const auto& r : recs) {
      py::dict d;
      d["id"] = r.id;
      d["comm_id"] = r.comm_id;
      d["seq"] = r.seq_number;
      d["coll"] = r.coll_type;
      d["algo"] = r.algo;
      d["proto"] = r.proto;
      d["nchannels"] = r.nchannels;
      d["kernel_us"] = r.kernel_stop_ns > r.kernel_start_ns
                           ? (r.kernel_stop_ns - r.kernel_start_ns) / 1e3
                           : -1.0;
      out.append(d);
    }
    return out;
  });

  bind_sim(m);
  bind_emulated_nccl(m);
}
