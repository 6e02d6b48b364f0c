// dynamiccl_pg._C: binds the C++ core into Python. Registration of the backend happens in
// dynamiccl_pg/__init__.py at import (never at library load).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include <dlfcn.h>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "backend/cpu_arm_catalog.h"
#include "backend/hint_scope.h"
#include "backend/nccl_engine.h"
#include "backend/process_group_dynamiccl.h"
#include "nccl_plugin/dynamiccl_nccl.h"

namespace py = pybind11;

namespace dynamiccl {

void bind_sim(py::module_& m);  // python/sim_bindings.cpp

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

template <typename T>
T get_or(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

// The Python side (dynamiccl_pg/config.py) validates every value with a message naming it; these
// checks only guard the boundary.
BackendConfig config_from_dict(const py::dict& d) {
  BackendConfig c;
  const auto mode = get_or<std::string>(d, "mode", "learn");
  TORCH_CHECK(parse_mode(mode, &c.mode), "dynamiccl: unknown mode '", mode,
              "'; accepted: learn, frozen, off");
  c.round_calls = get_or<int>(d, "round_calls", c.round_calls);
  const auto reduce = get_or<std::string>(d, "cost_reduce", "auto");
  TORCH_CHECK(reduce == "auto" || reduce == "min" || reduce == "max",
              "dynamiccl: unknown cost_reduce '", reduce, "'; accepted: auto, min, max");
  c.cost_reduce = reduce == "max"   ? CostReduce::kMax
                  : reduce == "min" ? CostReduce::kMin
                                    : CostReduce::kAuto;
  c.force = get_or<std::map<std::string, std::string>>(d, "force", {});
  for (const auto& [desc, role] : get_or<std::map<std::string, std::string>>(d, "role_map", {})) {
    Role r;
    TORCH_CHECK(parse_role(role, &r), "dynamiccl: unknown role '", role, "' for group '", desc,
                "'");
    c.role_map[desc] = r;
  }
  c.decision_log_capacity = get_or<size_t>(d, "decision_log", c.decision_log_capacity);
  c.trace = get_or<bool>(d, "trace", false);
  c.nccl_tuning = get_or<bool>(d, "nccl_tuning", true);
  c.learner.seed = get_or<uint64_t>(d, "seed", 0);
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
    d["incumbent"] = s.arms.at(s.incumbent).name;
    d["phase"] = s.phase;
    d["calls"] = s.calls;
    d["probes"] = s.probes;
    d["alarms"] = s.alarms;
    d["frozen"] = s.frozen;
    d["converged_at_call"] = s.converged_at_call;
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

PolicySnapshot snapshot_from_py(const py::dict& d) {
  PolicySnapshot snap;
  for (const auto& item : d["states"].cast<py::list>()) {
    auto s = item.cast<py::dict>();
    StateSnapshot st;
    const auto role = s["role"].cast<std::string>();
    const auto op = s["op"].cast<std::string>();
    TORCH_CHECK(parse_role(role, &st.role), "dynamiccl: policy file names unknown role '", role,
                "'");
    TORCH_CHECK(parse_op(op, &st.op), "dynamiccl: policy file names unknown op '", op, "'");
    st.size_bin = s["size_bin"].cast<int>();
    TORCH_CHECK(st.size_bin >= 0 && st.size_bin < kNumSizeBins, "dynamiccl: policy file size_bin ",
                st.size_bin, " is out of range 0..", kNumSizeBins - 1);
    st.incumbent = s["incumbent"].cast<std::string>();
    st.converged = s["converged"].cast<bool>();
    for (const auto& a : s["arms"].cast<py::list>()) {
      auto ad = a.cast<py::dict>();
      st.arms.push_back(ArmSnapshot{ad["name"].cast<std::string>(), ad["samples"].cast<uint64_t>(),
                                    ad["mean_us"].cast<double>(), ad["m2"].cast<double>(),
                                    ad["eliminated"].cast<bool>()});
    }
    snap.states.push_back(std::move(st));
  }
  return snap;
}

py::list summary_to_py(const PG& pg) {
  py::list out;
  const Telemetry& t = pg.telemetry();
  for (int e = 0; e < kNumEngines; ++e) {
    for (int o = 0; o < kNumOps; ++o) {
      for (int b = 0; b < kNumSizeBins; ++b) {
        const SummaryCell& c = t.summary(e, static_cast<OpKind>(o), b);
        const uint64_t calls = c.calls.load();
        if (!calls) continue;
        const uint64_t timed = c.timed.load();
        py::dict d;
        d["engine"] = e == 0 ? "cpu" : "nccl";
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
  OpKind op;
  TORCH_CHECK(parse_op(op_str, &op), "dynamiccl: unknown op '", op_str, "'");
  std::vector<std::string> names;
  for (const auto& a : cat.arms(op)) names.push_back(a.name);
  return names;
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
      .def("stats",
           [](const PG& pg, int engine) -> py::object {
             const Learner* l = pg.learner(engine);
             return l ? py::object(stats_to_py(*l)) : py::object(py::list());
           })
      .def("arms",
           [](const PG& pg, int engine, const std::string& op) {
             const ArmCatalog* c = pg.catalog(engine);
             return c ? arm_names(*c, op) : std::vector<std::string>{};
           })
      .def("epoch",
           [](const PG& pg, int engine) {
             const Learner* l = pg.learner(engine);
             return l ? l->epoch() : 0u;
           })
      .def("decision_log",
           [](const PG& pg) {
             py::list out;
             for (const auto& e : pg.telemetry().decision_log()) {
               out.append(py::make_tuple(e.seq, op_name(static_cast<OpKind>(e.op)), e.bytes,
                                         e.state_id, e.arm, e.epoch, e.engine, e.probe, e.forced));
             }
             return out;
           })
      .def("decision_hash", [](const PG& pg) { return pg.telemetry().decision_hash(); })
      .def("decisions_logged", [](const PG& pg) { return pg.telemetry().decisions_logged(); })
      .def("call_summary", &summary_to_py)
      .def("trace_records",
           [](const PG& pg) {
             py::list out;
             for (const auto& t : pg.telemetry().traces()) {
               out.append(py::make_tuple(t.seq, op_name(static_cast<OpKind>(t.op)), t.bytes,
                                         t.engine, role_name(static_cast<Role>(t.role)), t.arm,
                                         t.probe, t.epoch, t.start_ns, t.end_ns.load()));
             }
             return out;
           })
      .def("add_step_time", &PG::add_step_time)
      .def("add_loss", &PG::add_loss)
      .def("snapshot",
           [](PG& pg, int engine) -> py::object {
             const Learner* l = pg.learner(engine);
             return l ? py::object(snapshot_to_py(l->snapshot())) : py::object(py::none());
           })
      .def("restore", [](PG& pg, int engine, const py::dict& snap) {
        pg.mutable_learner(engine)->restore(snapshot_from_py(snap));
      });

  m.def("set_hint", [](int role, int bucket, int is_last, int stage, int direction, int priority) {
    set_current_hint(Hint{role, bucket, is_last, stage, direction, priority});
  });
  m.def("get_hint", [] {
    const Hint& h = current_hint();
    return py::make_tuple(h.role, h.bucket, h.is_last, h.stage, h.direction, h.priority);
  });
  m.def("op_names", &op_names);
  m.def("role_names", &role_names);
  m.def("cpu_arm_names", [](const std::string& op, int group_size) {
    return arm_names(CpuArmCatalog(group_size), op);
  });
  m.def("nccl_arm_names", [](const std::string& op) { return arm_names(NcclArmCatalog(2), op); });
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
}
