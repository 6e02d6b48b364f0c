// The step model (sim/step_model.h): step time = compute (stretched by interference) + exposed
// calls + tails, on hand-computed steps; interference grows with channels; the step-time
// oracle is never slower than NCCL's default; scenarios without compute are untouched.
#include <gtest/gtest.h>

#include <cmath>

#include "nccl_model/cost_model.h"
#include "sim/runner.h"
#include "sim/step_model.h"

namespace dynamiccl {
namespace sim {
namespace {

ComputeSpec compute(double fwd, double bwd, double post) {
  ComputeSpec c;
  c.fwd_us = fwd;
  c.bwd_us = bwd;
  c.post_us = post;
  return c;
}

// fwd 100, bwd 200, post 50 (one microbatch): an exposed call at fwd 0.5 (30 us), an
// overlapped call at bwd 0.25 (100 us, slowdown 0.5), and an overlapped call at bwd 0.9
// (40 us, slowdown 0) whose tail outlasts backward.
TEST(SimSteps, StepTimeIsComputePlusExposedPlusTails) {
  const StepModel m(compute(100, 200, 50), 1, 1);
  StepModel::State s = m.start();
  std::vector<StepModel::Wait> waits;
  // Forward to 50 us, then blocked 30 us.
  EXPECT_DOUBLE_EQ(m.issue(s, {0, m.segment(0, 0), 0.5, false}, 0, 30, 0, &waits), 30);
  EXPECT_DOUBLE_EQ(s.t, 80);
  // Rest of forward (50) ends at 130; backward 0.25 (50 us) at 180: the call runs 180..280 at
  // rate 1/1.5, so the 100 us of compute that reaches 0.75 takes 150 us: backward at 0.75 by
  // 330 (100 us inside the call = 66.7 of work, then 33.3 at full speed).
  EXPECT_DOUBLE_EQ(m.issue(s, {0, m.segment(0, 1), 0.25, true}, 1, 100, 0.5, &waits), 0);
  EXPECT_DOUBLE_EQ(s.t, 180);
  // To 0.9: 130 us of work; 66.67 inside the call (100 us wall), 63.33 after: 180+100+63.33.
  m.issue(s, {0, m.segment(0, 1), 0.9, true}, 2, 40, 0.0, &waits);
  EXPECT_NEAR(s.t, 343.333, 1e-3);
  // The last call runs 343.33..383.33; backward's last 20 us end at 363.33: a 20 us tail.
  const double step = m.finish(s, &waits);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].call, 2);
  EXPECT_NEAR(waits[0].wait_us, 20, 1e-9);
  // Step = compute 350 + exposed 30 + interference 33.33 + tail 20.
  EXPECT_NEAR(step, 350 + 30 + 100.0 / 3 + 20, 1e-9);
}

TEST(SimSteps, ASendAtThePhaseEndRunsIntoTheNextPhase) {
  const StepModel m(compute(100, 100, 0), 1, 1);
  StepModel::State s = m.start();
  m.issue(s, {0, m.segment(0, 0), 1.0, true}, 0, 80, 0.0, nullptr);
  EXPECT_DOUBLE_EQ(s.t, 100);
  EXPECT_DOUBLE_EQ(m.finish(s, nullptr), 200);  // hidden behind backward
}

TEST(SimSteps, InterferenceGrowsWithChannelsAndProtocolTraffic) {
  const ComputeSpec c = compute(1, 1, 1);
  const uint64_t bytes = 64ull << 20;
  double prev = -1;
  for (int ch : {2, 8, 16, 32}) {
    const double slow = interference(c, ch, nccl::kProtoSimple, bytes, 300);
    EXPECT_GT(slow, prev);
    prev = slow;
  }
  EXPECT_GT(interference(c, 16, nccl::kProtoLL, bytes, 300),
            interference(c, 16, nccl::kProtoLL128, bytes, 300));
  EXPECT_GT(interference(c, 16, nccl::kProtoLL128, bytes, 300),
            interference(c, 16, nccl::kProtoSimple, bytes, 300));
}

ScenarioSpec ddp_with_compute(double saturation) {
  ScenarioSpec s;
  s.name = "steps";
  s.seed = 5;
  s.steps = 150;
  s.topology.nodes = 1;
  s.topology.gpus_per_node = 8;
  s.topology.gpu = "hopper";
  s.topology.intra = {"nvlink", 450.0, 0.0};
  s.noise_sigma = 0.03;
  s.channel_model.saturation = saturation;
  s.topology.channels = 32;
  s.compute = compute(4000, 8000, 1000);
  WorkloadSpec ddp;
  ddp.kind = "ddp";
  ddp.layers = 24;
  ddp.layer_bytes = 64ull << 20;
  s.workload = {ddp};
  return s;
}

TEST(SimSteps, OracleStepIsNeverSlowerThanTheDefaultAndCapsHelpTheStep) {
  const SimResult r = run_scenario(ddp_with_compute(0.25));
  ASSERT_EQ(r.step_time_default_us.size(), 150u);
  ASSERT_EQ(r.step_time_learned_us.size(), 150u);
  double def = 0, oracle = 0;
  for (size_t i = 0; i < r.step_time_default_us.size(); ++i) {
    EXPECT_LE(r.step_time_oracle_us[i], r.step_time_default_us[i]);
    EXPECT_GE(r.step_time_default_us[i], 13000);  // at least the compute
    def += r.step_time_default_us[i];
    oracle += r.step_time_oracle_us[i];
  }
  EXPECT_LT(oracle, 0.99 * def);  // channel caps free SMs for the backward
}

TEST(SimSteps, WithoutComputeNothingChanges) {
  ScenarioSpec s = ddp_with_compute(0.5);
  s.compute = ComputeSpec{};
  const SimResult r = run_scenario(s);
  EXPECT_TRUE(r.step_time_default_us.empty());
  EXPECT_TRUE(r.step_time_oracle_us.empty());
  EXPECT_EQ(r.step_default_us.size(), 150u);
}

}  // namespace
}  // namespace sim
}  // namespace dynamiccl
