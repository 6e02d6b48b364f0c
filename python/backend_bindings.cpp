// The backend's side of dynamiccl_pg._C: ProcessGroupDynamicCCL (its configuration from the dict
// dynamiccl_pg/config.py resolves, its learners, its telemetry), the defaults of that
// configuration, and the hints framework integration sets.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/ddp_comm_hook.h"
#include "backend/hint_scope.h"
#include "backend/process_group_dynamiccl.h"
#include "backend/surface.h"
#include "bindings.h"

namespace dynamiccl {
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
namespace bindings {
namespace {

using PG = ProcessGroupDynamicCCL;
using PGClass = py::class_<PG, NoGilDestructorPtr<PG>>;

c10::intrusive_ptr<c10d::Backend> as_backend(const py::object& obj) {
  if (obj.is_none()) return {};
  auto* raw = obj.cast<c10d::Backend*>();
  return c10::intrusive_ptr<c10d::Backend>::reclaim_copy(raw);
}

// A Python callable (the creator's, dynamiccl_pg.backend) held so that it is released under the
// GIL, whichever thread drops the last reference.
std::shared_ptr<py::object> hold(py::object fn) {
  return std::shared_ptr<py::object>(new py::object(std::move(fn)), [](py::object* o) {
    if (!Py_IsInitialized()) return;  // at exit: leak rather than touch a dead interpreter
    py::gil_scoped_acquire gil;
    delete o;
  });
}

// The creator's part in what a group becomes (PG::Factories): fn(store, ranks, parent_rank,
// timeout, name, desc) -> child; fn(store, gloo, cuda, rank, size, timeout, name, desc) -> merged
// group; fn(uuid, rank, size) after a reconfigure. Each takes the GIL before it makes any Python
// object (the engines' calls come without it).
PG::Factories python_factories(py::object split, py::object merge, py::object membership) {
  PG::Factories f;
  f.split = [fn = hold(std::move(split))](const PG::SplitRequest& r) {
    py::gil_scoped_acquire gil;
    return as_backend(
        (*fn)(r.store, r.ranks, r.parent_rank, r.timeout, r.group_name, r.group_desc));
  };
  f.merge = [fn = hold(std::move(merge))](const PG::MergeRequest& r) {
    py::gil_scoped_acquire gil;
    py::object cuda = r.cuda ? py::cast(r.cuda) : py::object(py::none());
    return as_backend((*fn)(r.store, py::cast(r.gloo), cuda, r.rank, r.size, r.timeout,
                            r.group_name, r.group_desc));
  };
  f.membership = [fn = hold(std::move(membership))](int64_t uuid, int rank, int size) {
    py::gil_scoped_acquire gil;
    (*fn)(uuid, rank, size);
  };
  return f;
}

const char* cost_reduce_name(CostReduce r) { return cost_reduce_names().name(static_cast<int>(r)); }

// Head settings: (role or "all", key, value); keys and ranges are the learner's table.
void set_heads(const py::dict& d, LearnerConfig* learner) {
  for (const auto& [role, key, value] :
       get_or<std::vector<std::tuple<std::string, std::string, double>>>(d, "heads", {})) {
    try {
      if (role == "all") {
        for (HeadConfig& h : learner->heads) set_head_setting(h, key, value);
      } else {
        set_head_setting(
            learner->heads[static_cast<int>(parse_or_throw<Role>(role_names(), role, "role"))], key,
            value);
      }
    } catch (const std::invalid_argument& e) {
      TORCH_CHECK_VALUE(false, "dynamiccl: ", role, ".", e.what());
    }
  }
}

// The Python side (dynamiccl_pg/config.py) validates every value with a message naming it; these
// checks only guard the boundary. A key left out takes BackendConfig's default.
BackendConfig config_from_dict(const py::dict& d) {
  BackendConfig c;
  c.mode = parse_or_throw<Mode>(mode_names(), get_or<std::string>(d, "mode", mode_name(c.mode)),
                                "mode");
  c.round_calls = get_or<int>(d, "round_calls", c.round_calls);
  c.cost_reduce = parse_or_throw<CostReduce>(
      cost_reduce_names(), get_or<std::string>(d, "cost_reduce", cost_reduce_name(c.cost_reduce)),
      "cost_reduce");
  c.force = get_or<std::map<std::string, std::string>>(d, "force", {});
  for (const auto& [desc, role] : get_or<std::map<std::string, std::string>>(d, "role_map", {})) {
    c.role_map[desc] = parse_or_throw<Role>(role_names(), role, "role");
  }
  c.decision_log_capacity = get_or<size_t>(d, "decision_log", c.decision_log_capacity);
  c.trace = get_or<bool>(d, "trace", c.trace);
  c.check_calls = get_or<bool>(d, "check_calls", c.check_calls);
  c.nccl_tuning = get_or<bool>(d, "nccl_tuning", c.nccl_tuning);
  c.nccl_emulated = get_or<bool>(d, "nccl_emulated", c.nccl_emulated);
  c.connect_at_reconfigure = get_or<bool>(d, "connect_at_reconfigure", c.connect_at_reconfigure);
  for (auto [key, effect] : {std::pair{"test_slow_arm", &c.test_slow_arm},
                             std::pair{"test_busy_arm", &c.test_busy_arm}}) {
    if (d.contains(key) && !d[key].is_none()) {
      std::tie(effect->arm, effect->us) = d[key].cast<std::tuple<std::string, int>>();
    }
  }
  if (d.contains("nccl_topology")) {
    c.nccl_topology = topology_from_py(d["nccl_topology"].cast<py::dict>());
    c.nccl_group = nccl::GroupShape{c.nccl_topology.nodes, c.nccl_topology.gpus_per_node};
  }
  c.nccl_version = get_or<int>(d, "nccl_version", c.nccl_version);
  c.prior_path = get_or<std::string>(d, "prior", c.prior_path);
  set_heads(d, &c.learner);
  c.learner.rules = RuleSet::without(get_or<std::vector<std::string>>(d, "ablate", {}));
  c.learner.step_regression = get_or<double>(d, "step_regression", c.learner.step_regression);
  c.learner.loss_stall_rounds = get_or<int>(d, "loss_stall_rounds", c.learner.loss_stall_rounds);
  return c;
}

// The defaults of what config_from_dict reads, by the same keys: those of a default-constructed
// BackendConfig, and every head's regret budget (DYNAMICCL_REGRET_BUDGET sets it on all heads).
py::dict backend_defaults() {
  const BackendConfig c;
  py::dict d;
  d["mode"] = mode_name(c.mode);
  d["round_calls"] = c.round_calls;
  d["cost_reduce"] = cost_reduce_name(c.cost_reduce);
  d["decision_log"] = c.decision_log_capacity;
  d["trace"] = c.trace;
  d["check_calls"] = c.check_calls;
  d["nccl_tuning"] = c.nccl_tuning;
  d["nccl_emulated"] = c.nccl_emulated;
  d["regret_budget"] = HeadConfig{}.regret_budget;
  d["step_regression"] = c.learner.step_regression;
  d["loss_stall_rounds"] = c.learner.loss_stall_rounds;
  return d;
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

py::tuple record_to_py(const CallRecord& r) {
  return py::make_tuple(r.seq, op_name(r.op), r.bytes, r.state_id, r.arm, r.epoch,
                        engine_name(r.engine), r.probe, r.forced);
}

py::list trace_records(const PG& pg) {
  py::list out;
  for (const auto& t : pg.telemetry().traces()) {
    const CallRecord& r = t.record;
    out.append(py::make_tuple(r.seq, op_name(r.op), r.bytes, engine_name(r.engine),
                              role_name(r.role), exposure_name(r.exposure), r.arm, r.probe,
                              r.learned, r.epoch, r.start_ns, t.end_ns.load()));
  }
  return out;
}

// Creation, and what the group is.
PGClass bind_process_group_class(py::module_& m) {
  auto backend_base = py::module_::import("torch._C._distributed_c10d").attr("Backend");
  PGClass cls(m, "ProcessGroupDynamicCCL", backend_base, py::dynamic_attr());
  cls.def(py::init([](int rank, int size, const py::object& gloo, const py::object& nccl,
                      const py::dict& config, std::chrono::milliseconds timeout, int nccl_channel) {
            PG::Engines engines{as_backend(gloo), as_backend(nccl)};
            auto cfg = config_from_dict(config);
            py::gil_scoped_release no_gil;
            return c10::make_intrusive<PG>(rank, size, std::move(engines), std::move(cfg), timeout,
                                           nccl_channel);
          }),
          py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("nccl"), py::arg("config"),
          py::arg("timeout"), py::arg("nccl_channel") = 0)
      .def_property_readonly("mode", [](const PG& pg) { return mode_name(pg.mode()); })
      .def_property_readonly("rules_off",
                             [](const PG& pg) {
                               std::vector<std::string> off;
                               for (const RuleInfo& r : rule_infos()) {
                                 if (!pg.config().learner.rules.on(r.rule)) off.push_back(r.name);
                               }
                               return off;
                             })
      .def_property_readonly("group_role", [](PG& pg) { return role_name(pg.group_role()); })
      .def_property_readonly("group_desc", [](const PG& pg) { return pg.getGroupDesc(); })
      .def_property_readonly("learned_calls", &PG::learned_calls)
      .def_property_readonly("steps", &PG::steps)
      .def_property_readonly("rounds_applied", &PG::rounds_applied)
      .def("round_cost_us", &PG::round_cost_us, py::arg("engine"),
           "what the last consensus round cost, as the engine's learner prices it (us; 0: none "
           "yet)")
      .def_property_readonly("nccl_tuning_active", &PG::nccl_tuning_active)
      .def_property_readonly("nodes", &PG::nodes, "nodes the group spans (as described)")
      .def_property_readonly("prior_path", &PG::prior_path,
                             "the learned prior's file; empty: the analytic prior")
      .def("has_engine", [](const PG& pg, EngineKind e) { return pg.catalog(e) != nullptr; });
  return cls;
}

// Its learners: their states, arms and epochs.
void def_learners(PGClass& cls) {
  cls.def("stats",
          [](const PG& pg, EngineKind engine) -> py::object {
            const Learner* l = pg.learner(engine);
            return l ? py::object(stats_to_py(*l)) : py::object(py::list());
          })
      .def("arms",
           [](const PG& pg, EngineKind engine, const std::string& op) {
             const ArmCatalog* c = pg.catalog(engine);
             return c ? arm_names(*c, op) : std::vector<std::string>{};
           })
      .def("epoch", [](const PG& pg, EngineKind engine) {
        const Learner* l = pg.learner(engine);
        return l ? l->epoch() : 0u;
      });
}

// What it decided and ran.
void def_telemetry(PGClass& cls) {
  cls.def("decision_log",
          [](const PG& pg) {
            py::list out;
            for (const auto& r : pg.telemetry().decision_log()) out.append(record_to_py(r));
            return out;
          })
      .def("decision_hash", [](const PG& pg) { return pg.telemetry().decision_hash(); })
      .def("decisions_logged", [](const PG& pg) { return pg.telemetry().decisions_logged(); })
      .def("call_summary", &summary_to_py)
      .def("trace_records", &trace_records);
}

// Training signals, policy snapshots, split() and the group's end.
void def_signals_and_policy(PGClass& cls) {
  cls.def("end_step", &PG::end_step_from_user)
      .def("add_loss", &PG::add_loss)
      .def("snapshot",
           [](PG& pg, EngineKind engine) -> py::object {
             const Learner* l = pg.learner(engine);
             return l ? py::object(snapshot_to_py(l->snapshot())) : py::object(py::none());
           })
      .def("restore",
           [](PG& pg, EngineKind engine, const py::dict& snap) {
             const ArmCatalog* catalog = pg.catalog(engine);
             TORCH_CHECK_VALUE(catalog, "dynamiccl: the ", engine_name(engine),
                               " engine is not available in this group");
             pg.mutable_learner(engine)->restore(snapshot_from_py(snap, *catalog));
           })
      .def(
          "set_factories",
          [](PG& pg, py::object split, py::object merge, py::object membership) {
            pg.set_factories(
                python_factories(std::move(split), std::move(merge), std::move(membership)));
          },
          py::arg("split"), py::arg("merge"), py::arg("membership"),
          "The creator's part: split(store, ranks, parent_rank, timeout, name, desc) -> child; "
          "merge(store, gloo, cuda, rank, size, timeout, name, desc) -> group; "
          "membership(uuid, rank, size) after a reconfigure (agrees on the settings).")
      .def_property_readonly("shut_down", &PG::is_shut_down,
                             "True once the group was destroyed (shutdown()).");
}

void bind_hints(py::module_& m) {
  m.def("set_hint", [](int role, int bucket, int is_last, int stage, int direction, int priority) {
    set_current_hint(Hint{role, bucket, is_last, stage, direction, priority});
  });
  m.def("get_hint", [] {
    const Hint& h = current_hint();
    return py::make_tuple(h.role, h.bucket, h.is_last, h.stage, h.direction, h.priority);
  });
  // dynamiccl_pg.register_ddp_hook's C++ half: DDP's reducer and the group to all-reduce on.
  m.def(
      "register_ddp_comm_hook",
      [](const py::object& reducer, const py::object& group) {
        auto pg = c10::intrusive_ptr<c10d::ProcessGroup>::reclaim_copy(
            group.cast<c10d::ProcessGroup*>());
        reducer.cast<c10d::Reducer*>()->register_comm_hook(
            std::make_unique<BucketHintCommHook>(std::move(pg)));
      },
      py::arg("reducer"), py::arg("group"),
      "Registers the bucket-hint comm hook (C++) on a DDP reducer, all-reducing on `group`.");
}

}  // namespace
}  // namespace bindings

void bind_backend(py::module_& m) {
  using namespace bindings;
  PGClass cls = bind_process_group_class(m);
  def_learners(cls);
  def_telemetry(cls);
  def_signals_and_policy(cls);
  bind_hints(m);
  m.def(
      "backend_surface",
      [] {
        py::list out;
        for (const SurfaceEntry& e : backend_surface()) {
          out.append(py::make_tuple(e.method, answer_name(e.answer), e.how));
        }
        return out;
      },
      "How the backend answers every virtual of c10d::Backend: (method, answer, how), answer one "
      "of ours, forwarded, inherited, not offered (csrc/backend/surface.h).");
  m.def("backend_defaults", &backend_defaults,
        "The backend configuration's defaults (csrc/backend/config.h and the learner's), by the "
        "keys of the config dict ProcessGroupDynamicCCL takes.");
}

}  // namespace dynamiccl
