// validate_spec reports the rules that relate several fields with their key paths.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/scenario_spec.h"

namespace dynamiccl {
namespace sim {
namespace {

ScenarioSpec two_nodes() {
  ScenarioSpec s;
  s.steps = 10;
  s.topology.nodes = 2;
  s.topology.inter = {"ib", 50.0, 2.0};
  WorkloadSpec call;
  call.role = "dp";
  call.op = "allreduce";
  call.bytes = 1 << 20;
  s.workload = {call};
  return s;
}

std::vector<std::string> paths(const ScenarioSpec& s) {
  std::vector<std::string> out;
  for (const SpecProblem& p : spec_problems(s)) out.push_back(p.path + ": " + p.message);
  return out;
}

TEST(ValidateSpec, RulesRelatingKeysNameTheirPaths) {
  EXPECT_TRUE(paths(two_nodes()).empty());

  ScenarioSpec s = two_nodes();
  s.topology.inter = LinkSpec();
  EXPECT_EQ(paths(s),
            std::vector<std::string>{"topology.inter: missing (required when nodes > 1)"});
  s.topology.nodes = 1;  // one node needs no network
  EXPECT_TRUE(paths(s).empty());

  s = two_nodes();
  s.topology.sharp = true;
  s.topology.inter.type = "roce";
  s.congestion = {{10, 5, "inter", 0.5, 1.0}};
  s.workload[0].op = "send";
  EXPECT_EQ(paths(s), (std::vector<std::string>{
                          "topology.sharp: in-network reduction needs inter.type 'ib'",
                          "workload[0].group: a send needs a group of exactly 2 ranks, 'dp' has 16",
                          "congestion[0]: to_step (5) must be greater than from_step (10)",
                          "congestion[0].from_step: 10 is not before the end (steps=10)",
                      }));

  s = two_nodes();
  s.workload.push_back(s.workload[0]);
  s.workload[1].group = {"dp", 1, 0};
  s.workload[0].kind = "ddp";
  s.workload[0].layers = 4;
  EXPECT_EQ(paths(s), (std::vector<std::string>{
                          "workload[0].layer_bytes: missing (required with layers)",
                          "workload[1].group: group 'dp' is 1x8 here but 2x8 in an earlier entry",
                      }));
  EXPECT_THROW(validate_spec(s), std::invalid_argument);
}

}  // namespace
}  // namespace sim
}  // namespace dynamiccl
