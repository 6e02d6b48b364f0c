// Python access to the simulator (dynamiccl_pg._C.sim): the run of a ScenarioSpec and its result.
// Specs come from scenario files through the schema (scenario_schema_bindings.cpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "core/types.h"
#include "prior/learned_prior_catalog.h"
#include "sim/runner.h"
#include "sim/workload.h"

namespace dynamiccl {

namespace {

OpKind op_from(const std::string& name) {
  OpKind op;
  if (!parse_op(name, &op)) throw py::value_error("unknown op '" + name + "'");
  return op;
}

void bind_results(py::module_& m) {
  using namespace sim;
  py::class_<CostTotals>(m, "CostTotals")
      .def_readonly("default_us", &CostTotals::default_us)
      .def_readonly("learned_us", &CostTotals::learned_us)
      .def_readonly("oracle_us", &CostTotals::oracle_us)
      .def_readonly("calls", &CostTotals::calls)
      .def_readonly("probes", &CostTotals::probes)
      .def_readonly("rounds", &CostTotals::rounds)
      .def_readonly("rounds_us", &CostTotals::rounds_us);
  py::class_<StateResult::Event>(m, "StateEvent")
      .def_readonly("call", &StateResult::Event::call)
      .def_readonly("step", &StateResult::Event::step)
      .def_readonly("what", &StateResult::Event::what)
      .def_readonly("from_arm", &StateResult::Event::from)
      .def_readonly("to_arm", &StateResult::Event::to);
  py::class_<StateResult>(m, "StateResult")
      .def_readonly("group", &StateResult::group)
      .def_property_readonly("role", [](const StateResult& s) { return role_name(s.role); })
      .def_property_readonly("op", [](const StateResult& s) { return op_name(s.op); })
      .def_readonly("size_bin", &StateResult::size_bin)
      .def_readonly("arms", &StateResult::arms)
      .def_readonly("calls_to_converge", &StateResult::calls_to_converge)
      .def_readonly("incumbent", &StateResult::incumbent)
      .def_readonly("default_arm", &StateResult::default_arm)
      .def_readonly("oracle_arm", &StateResult::oracle_arm)
      .def_readonly("totals", &StateResult::totals)
      .def_readonly("after_convergence", &StateResult::after_convergence)
      .def_readonly("alarms", &StateResult::alarms)
      .def_readonly("events", &StateResult::events);
  py::class_<RecoveryResult>(m, "RecoveryResult")
      .def_readonly("episode", &RecoveryResult::episode)
      .def_readonly("step", &RecoveryResult::step)
      .def_readonly("group", &RecoveryResult::group)
      .def_property_readonly("role", [](const RecoveryResult& r) { return role_name(r.role); })
      .def_property_readonly("op", [](const RecoveryResult& r) { return op_name(r.op); })
      .def_readonly("size_bin", &RecoveryResult::size_bin)
      .def_readonly("needs_switch", &RecoveryResult::needs_switch)
      .def_readonly("ratio_at_start", &RecoveryResult::ratio_at_start)
      .def_readonly("calls", &RecoveryResult::calls);
  py::class_<SimResult>(m, "SimResult")
      .def_readonly("name", &SimResult::name)
      .def_readonly("steps", &SimResult::steps)
      .def_readonly("total", &SimResult::total)
      .def_readonly("after_convergence", &SimResult::after_convergence)
      .def_property_readonly("roles",
                             [](const SimResult& r) {
                               py::dict d;
                               for (int i = 0; i < kNumRoles; ++i) {
                                 if (r.roles[i].calls == 0) continue;
                                 d[role_name(static_cast<Role>(i))] = r.roles[i];
                               }
                               return d;
                             })
      .def_readonly("step_default_us", &SimResult::step_default_us)
      .def_readonly("step_learned_us", &SimResult::step_learned_us)
      .def_readonly("step_oracle_us", &SimResult::step_oracle_us)
      .def_readonly("step_time_default_us", &SimResult::step_time_default_us)
      .def_readonly("step_time_learned_us", &SimResult::step_time_learned_us)
      .def_readonly("step_time_oracle_us", &SimResult::step_time_oracle_us)
      .def_readonly("states", &SimResult::states)
      .def_readonly("recoveries", &SimResult::recoveries)
      .def_readonly("groups", &SimResult::groups)
      .def_property_readonly("policies", [](const SimResult& r) {
        py::list out;  // each group's entry of a policy file (dynamiccl_pg/policy_io.py)
        for (const sim::GroupPolicy& p : r.policies) {
          py::dict d;
          d["group"] = p.group;
          d["group_size"] = p.group_size;
          d["nodes"] = p.nodes;
          d["snapshot"] = bindings::snapshot_to_py(p.snapshot);
          out.append(d);
        }
        return out;
      });
  py::class_<ArmCost>(m, "ArmCost")
      .def_readonly("name", &ArmCost::name)
      .def_readonly("prior_us", &ArmCost::prior_us)
      .def_readonly("truth_us", &ArmCost::truth_us);
}

}  // namespace

void bind_scenario_schema(py::module_& sim);  // python/scenario_schema_bindings.cpp

void bind_sim(py::module_& m) {
  py::module_ s = m.def_submodule("sim", "NCCL collective simulator driving the real learner");
  bind_scenario_schema(s);
  bind_results(s);
  s.def(
      "run",
      [](const sim::ScenarioSpec& spec, std::shared_ptr<prior::Model> model,
         const std::vector<std::string>& rules_off) {
        const RuleSet rules = RuleSet::without(rules_off);  // before the GIL is released
        sim::CatalogWrapper wrap;
        if (model) {
          wrap = [model](std::shared_ptr<const ArmCatalog> base, const nccl::GroupShape& shape) {
            return std::make_shared<prior::LearnedPriorCatalog>(std::move(base), model,
                                                                EngineKind::kNccl, shape.nodes);
          };
        }
        py::gil_scoped_release release;
        return sim::run_scenario(spec, wrap, rules);
      },
      py::arg("spec"), py::arg("prior") = nullptr,
      py::arg("rules_off") = std::vector<std::string>{},
      "Run a scenario through the learner (with a learned prior: a PriorModel; with the learner "
      "rules named in rules_off switched off, to measure what they buy); returns a SimResult.");
  s.def(
      "arm_costs",
      [](const sim::ScenarioSpec& spec, const std::string& group, const std::string& op,
         uint64_t effective_bytes, int step) {
        sim::SimRunner runner(spec);
        return runner.arm_costs(group, op_from(op), effective_bytes, step);
      },
      py::arg("spec"), py::arg("group"), py::arg("op"), py::arg("bytes"), py::arg("step") = 0,
      "Arms a scenario's group offers for one call, with NCCL's nominal and the true cost.");
  s.def(
      "calls_per_step",
      [](const sim::ScenarioSpec& spec) { return sim::SimRunner(spec).calls_per_step(); },
      py::arg("spec"));
  s.def("ddp_buckets", &sim::ddp_buckets, py::arg("param_bytes"), py::arg("cap_bytes"),
        py::arg("first_cap_bytes"), "DDP's bucket sizes (issue order) for parameter sizes.");
}

}  // namespace dynamiccl
