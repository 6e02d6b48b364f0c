// Python access to the simulator (dynamiccl_pg._C.sim): the plain scenario structs that
// dynamiccl_pg/sim/scenario.py fills after validating a scenario file, the run, and its result.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "core/types.h"
#include "sim/runner.h"
#include "sim/scenario_spec.h"
#include "sim/workload.h"

namespace py = pybind11;

namespace dynamiccl {

namespace {

OpKind op_from(const std::string& name) {
  OpKind op;
  if (!parse_op(name, &op)) throw py::value_error("unknown op '" + name + "'");
  return op;
}

void bind_specs(py::module_& m) {
  using namespace sim;
  py::class_<LinkSpec>(m, "LinkSpec")
      .def(py::init<>())
      .def_readwrite("type", &LinkSpec::type)
      .def_readwrite("bw_GBps", &LinkSpec::bw_GBps)
      .def_readwrite("lat_us", &LinkSpec::lat_us);
  py::class_<TopologySpec>(m, "TopologySpec")
      .def(py::init<>())
      .def_readwrite("nodes", &TopologySpec::nodes)
      .def_readwrite("gpus_per_node", &TopologySpec::gpus_per_node)
      .def_readwrite("gpu", &TopologySpec::gpu)
      .def_readwrite("cpu", &TopologySpec::cpu)
      .def_readwrite("intra", &TopologySpec::intra)
      .def_readwrite("inter", &TopologySpec::inter)
      .def_readwrite("nvswitch", &TopologySpec::nvswitch)
      .def_readwrite("sharp", &TopologySpec::sharp)
      .def_readwrite("channels", &TopologySpec::channels);
  py::class_<TruthEntry>(m, "TruthEntry")
      .def(py::init<>())
      .def_readwrite("algo", &TruthEntry::algo)
      .def_readwrite("proto", &TruthEntry::proto)
      .def_readwrite("bw", &TruthEntry::bw)
      .def_readwrite("lat", &TruthEntry::lat);
  py::class_<ChannelModelSpec>(m, "ChannelModelSpec")
      .def(py::init<>())
      .def_readwrite("saturation", &ChannelModelSpec::saturation)
      .def_readwrite("contention", &ChannelModelSpec::contention)
      .def_readwrite("lat_per_channel_us", &ChannelModelSpec::lat_per_channel_us);
  py::class_<CongestionSpec>(m, "CongestionSpec")
      .def(py::init<>())
      .def_readwrite("from_step", &CongestionSpec::from_step)
      .def_readwrite("to_step", &CongestionSpec::to_step)
      .def_readwrite("link", &CongestionSpec::link)
      .def_readwrite("bw_factor", &CongestionSpec::bw_factor)
      .def_readwrite("lat_factor", &CongestionSpec::lat_factor);
  py::class_<GroupSpec>(m, "GroupSpec")
      .def(py::init<>())
      .def_readwrite("name", &GroupSpec::name)
      .def_readwrite("nodes", &GroupSpec::nodes)
      .def_readwrite("gpus_per_node", &GroupSpec::gpus_per_node);
  py::class_<WorkloadSpec>(m, "WorkloadSpec")
      .def(py::init<>())
      .def_readwrite("kind", &WorkloadSpec::kind)
      .def_readwrite("role", &WorkloadSpec::role)
      .def_readwrite("op", &WorkloadSpec::op)
      .def_readwrite("bytes", &WorkloadSpec::bytes)
      .def_readwrite("per_step", &WorkloadSpec::per_step)
      .def_readwrite("phase", &WorkloadSpec::phase)
      .def_readwrite("group", &WorkloadSpec::group)
      .def_readwrite("param_bytes", &WorkloadSpec::param_bytes)
      .def_readwrite("bucket_cap_mb", &WorkloadSpec::bucket_cap_mb)
      .def_readwrite("first_bucket_mb", &WorkloadSpec::first_bucket_mb)
      .def_readwrite("layers", &WorkloadSpec::layers)
      .def_readwrite("layer_bytes", &WorkloadSpec::layer_bytes)
      .def_readwrite("reshard_after_forward", &WorkloadSpec::reshard_after_forward)
      .def_readwrite("activation_bytes", &WorkloadSpec::activation_bytes)
      .def_readwrite("calls_per_layer", &WorkloadSpec::calls_per_layer);
  py::class_<HeadOverride>(m, "HeadOverride")
      .def(py::init<>())
      .def_readwrite("role", &HeadOverride::role)
      .def_readwrite("key", &HeadOverride::key)
      .def_readwrite("value", &HeadOverride::value);
  py::class_<ScenarioSpec>(m, "ScenarioSpec")
      .def(py::init<>())
      .def_readwrite("name", &ScenarioSpec::name)
      .def_readwrite("seed", &ScenarioSpec::seed)
      .def_readwrite("steps", &ScenarioSpec::steps)
      .def_readwrite("microbatches", &ScenarioSpec::microbatches)
      .def_readwrite("topology", &ScenarioSpec::topology)
      .def_readwrite("truth", &ScenarioSpec::truth)
      .def_readwrite("noise_sigma", &ScenarioSpec::noise_sigma)
      .def_readwrite("outlier_rate", &ScenarioSpec::outlier_rate)
      .def_readwrite("outlier_factor", &ScenarioSpec::outlier_factor)
      .def_readwrite("arrival_skew_us", &ScenarioSpec::arrival_skew_us)
      .def_readwrite("overlap", &ScenarioSpec::overlap)
      .def_readwrite("channel_model", &ScenarioSpec::channel_model)
      .def_readwrite("congestion", &ScenarioSpec::congestion)
      .def_readwrite("workload", &ScenarioSpec::workload)
      .def_readwrite("channel_caps", &ScenarioSpec::channel_caps)
      .def_readwrite("derive_channel_caps", &ScenarioSpec::derive_channel_caps)
      .def_readwrite("round_calls", &ScenarioSpec::round_calls)
      .def_readwrite("ranks_sampled", &ScenarioSpec::ranks_sampled)
      .def_readwrite("round_cost_us", &ScenarioSpec::round_cost_us)
      .def_readwrite("heads", &ScenarioSpec::heads);
}

void bind_results(py::module_& m) {
  using namespace sim;
  py::class_<CostTotals>(m, "CostTotals")
      .def_readonly("default_us", &CostTotals::default_us)
      .def_readonly("learned_us", &CostTotals::learned_us)
      .def_readonly("oracle_us", &CostTotals::oracle_us)
      .def_readonly("calls", &CostTotals::calls)
      .def_readonly("probes", &CostTotals::probes);
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
      .def_readonly("alarms", &StateResult::alarms);
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
      .def_readonly("states", &SimResult::states)
      .def_readonly("recoveries", &SimResult::recoveries)
      .def_readonly("groups", &SimResult::groups);
  py::class_<ArmCost>(m, "ArmCost")
      .def_readonly("name", &ArmCost::name)
      .def_readonly("prior_us", &ArmCost::prior_us)
      .def_readonly("truth_us", &ArmCost::truth_us);
}

}  // namespace

void bind_sim(py::module_& m) {
  py::module_ s = m.def_submodule("sim", "NCCL collective simulator driving the real learner");
  bind_specs(s);
  bind_results(s);
  s.def(
      "run",
      [](const sim::ScenarioSpec& spec) {
        py::gil_scoped_release release;
        return sim::run_scenario(spec);
      },
      py::arg("spec"), "Run a scenario through the learner; returns a SimResult.");
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
