// Small scenarios run end to end through the real learner: it must beat NCCL's default where
// the truth says it can, stay within 1% of it where the default is right, reproduce exactly
// for a seed, and report recoveries when a congestion episode begins.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "policy/round_scheduler.h"
#include "sim/runner.h"

namespace dynamiccl {
namespace sim {
namespace {

// 4 nodes x 4 A100 with four IB ports per node; DDP buckets of ~32 MiB plus a scalar.
ScenarioSpec four_node_ddp(int steps) {
  ScenarioSpec s;
  s.name = "test";
  s.seed = 7;
  s.steps = steps;
  s.topology.nodes = 4;
  s.topology.gpus_per_node = 4;
  s.topology.gpu = "ampere";
  s.topology.intra = {"nvlink", 200.0, 0.0};
  s.topology.inter = {"ib", 12.5, 2.0};
  s.noise_sigma = 0.05;
  WorkloadSpec ddp;
  ddp.kind = "ddp";
  ddp.layers = 12;
  ddp.layer_bytes = 16ull << 20;
  WorkloadSpec scalar;
  scalar.role = "default";
  scalar.op = "allreduce";
  scalar.bytes = 4;
  s.workload = {ddp, scalar};
  return s;
}

TEST(SimRunner, LearnerBeatsTheDefaultWhereTheTruthSaysItMust) {
  ScenarioSpec s = four_node_ddp(1500);
  s.truth = {{"ring", "*", 0.25, 1.0}};  // NCCL's large-message pick runs on one port of four
  const SimResult r = run_scenario(s);
  ASSERT_GT(r.total.calls, 0u);
  const double headroom = r.total.default_us / r.total.oracle_us;
  const double speedup = r.total.default_us / r.total.learned_us;
  EXPECT_GT(headroom, 2.5);
  EXPECT_GT(speedup, 2.0) << "learned " << r.total.learned_us << " default " << r.total.default_us;
  ASSERT_GT(r.after_convergence.calls, 0u);
  EXPECT_LT(r.after_convergence.learned_us / r.after_convergence.oracle_us, 1.05);
  bool found = false;
  for (const StateResult& st : r.states) {
    if (st.role != Role::kDataParallel) continue;
    found = true;
    EXPECT_EQ(st.default_arm.rfind("ring/", 0), 0u) << st.default_arm;
    EXPECT_EQ(st.incumbent.rfind("tree/", 0), 0u) << st.incumbent;
  }
  EXPECT_TRUE(found);
}

// NCCL's model is the truth on 2 nodes x 8 H100 (benchmarks/scenarios/defaults_right.json).
TEST(SimRunner, WhereDefaultsAreRightTheLearnerCostsAtMostOnePercent) {
  ScenarioSpec s = four_node_ddp(3000);
  s.topology = TopologySpec();           // H100 nodes of 8 GPUs, NVLink ...
  s.topology.inter = {"ib", 50.0, 2.0};  // ... and InfiniBand
  s.topology.nodes = 2;
  s.seed = 11;
  s.noise_sigma = 0.03;
  s.workload[0].layers = 24;
  s.workload[0].layer_bytes = 32ull << 20;
  s.workload[1].per_step = 2;
  const SimResult r = run_scenario(s);
  EXPECT_NEAR(r.total.oracle_us, r.total.default_us, 1e-6 * r.total.default_us);
  EXPECT_LE(r.total.learned_us, 1.01 * r.total.default_us)
      << "learned/default - 1 = " << r.total.learned_us / r.total.default_us - 1;
}

TEST(SimRunner, OracleIsALowerBoundAndPerStepSeriesAddUp) {
  ScenarioSpec s = four_node_ddp(200);
  s.truth = {{"tree", "LL128", 0.7, 1.3}};
  const SimResult r = run_scenario(s);
  EXPECT_LE(r.total.oracle_us, r.total.learned_us);
  EXPECT_LE(r.total.oracle_us, r.total.default_us);
  ASSERT_EQ(r.step_default_us.size(), 200u);
  double d = 0, l = 0, o = 0;
  for (int i = 0; i < 200; ++i) {
    d += r.step_default_us[i];
    l += r.step_learned_us[i];
    o += r.step_oracle_us[i];
  }
  EXPECT_NEAR(d, r.total.default_us, 1e-6 * d);
  EXPECT_NEAR(l, r.total.learned_us, 1e-6 * l);
  EXPECT_NEAR(o, r.total.oracle_us, 1e-6 * o);
  uint64_t role_calls = 0;
  for (const CostTotals& t : r.roles) role_calls += t.calls;
  EXPECT_EQ(role_calls, r.total.calls);
  EXPECT_EQ(r.total.calls, 200u * 8u);  // 7 DDP buckets + 1 scalar per step
}

TEST(SimRunner, SameSeedSameRun) {
  ScenarioSpec s = four_node_ddp(300);
  s.truth = {{"ring", "*", 0.25, 1.0}};
  s.outlier_rate = 0.05;
  s.arrival_skew_us = 20;
  const SimResult a = run_scenario(s);
  const SimResult b = run_scenario(s);
  EXPECT_EQ(a.total.learned_us, b.total.learned_us);
  EXPECT_EQ(a.total.probes, b.total.probes);
  s.seed = 8;
  const SimResult c = run_scenario(s);
  EXPECT_NE(a.total.learned_us, c.total.learned_us);
}

TEST(SimRunner, CongestionEpisodeStartsRecoveryTracking) {
  ScenarioSpec s = four_node_ddp(1200);
  s.topology = TopologySpec();           // H100 nodes of 8 GPUs, NVLink ...
  s.topology.inter = {"ib", 50.0, 2.0};  // ... and InfiniBand
  s.topology.nodes = 4;
  s.workload[0].layers = 32;
  s.workload[0].layer_bytes = 8ull << 20;
  s.workload[0].bucket_cap_mb = 16;
  s.congestion = {{400, 900, "inter", 0.2, 1.0}};
  SimRunner runner(s);
  runner.run();
  const SimResult r = runner.result();
  ASSERT_FALSE(r.recoveries.empty());
  bool switched = false;
  for (const RecoveryResult& rec : r.recoveries) {
    EXPECT_EQ(rec.step, 400);
    EXPECT_EQ(rec.episode, 0);
    switched |= rec.needs_switch;
  }
  EXPECT_TRUE(switched);  // 16 MiB buckets: NCCL's Tree/LL128 loses to NVLS Tree when congested
  // The congested truth is slower; NCCL's model (and so its pick) is not.
  const std::vector<ArmCost> calm = runner.arm_costs("dp", OpKind::kAllReduce, 16u << 20, 0);
  const std::vector<ArmCost> hot = runner.arm_costs("dp", OpKind::kAllReduce, 16u << 20, 500);
  ASSERT_EQ(calm.size(), hot.size());
  EXPECT_EQ(calm[0].prior_us, hot[0].prior_us);
  EXPECT_GT(hot[0].truth_us, 1.5 * calm[0].truth_us);
}

TEST(SimRunner, BadSpecsNameTheField) {
  ScenarioSpec s = four_node_ddp(10);
  s.round_calls = 0;
  try {
    SimRunner r(s);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("round_calls=0"), std::string::npos) << e.what();
  }
  s = four_node_ddp(10);
  s.congestion = {{5, 5, "inter", 0.5, 1.0}};
  EXPECT_THROW(SimRunner{s}, std::invalid_argument);
  s = four_node_ddp(10);
  s.heads = {{"tp", {{"probe_budgett", 0.1}}}};
  try {
    SimRunner r(s);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("probe_budgett"), std::string::npos) << e.what();
  }
}

// A round's all-reduce is recursive doubling over the group: log2 of its ranks, two more where
// they are not a power of two (CpuEngine::min_allreduce folds the rest in and out).
TEST(RoundPrice, ExchangesGrowAsLog2OfTheGroup) {
  EXPECT_EQ(round_exchanges(1), 0);
  EXPECT_EQ(round_exchanges(2), 1);
  EXPECT_EQ(round_exchanges(4), 2);
  EXPECT_EQ(round_exchanges(5), 4);
  EXPECT_EQ(round_exchanges(1024), 10);
  EXPECT_EQ(round_exchanges(100000), 18);
}

// Rounds are priced by the model at the group's size: what of a round's all-reduce its K calls
// do not cover, charged to learning (and a fixed price where the scenario sets one).
TEST(RoundPrice, RoundsCostWhatTheirCallsDoNotCover) {
  ScenarioSpec s = four_node_ddp(100);
  s.workload.resize(1);  // the DDP buckets: a window of K calls is milliseconds
  SimResult covered = run_scenario(s);
  ASSERT_GT(covered.total.rounds, 0u);
  EXPECT_EQ(covered.total.rounds_us, 0.0);  // 16 ranks: 4 exchanges of 25 us, well covered

  s.hop_us = 1e6;  // a round far longer than its calls: every applied round waits
  const SimResult waited = run_scenario(s);
  ASSERT_GT(waited.total.rounds, 0u);
  EXPECT_GT(waited.total.rounds_us, 0.5 * 4 * 1e6 * static_cast<double>(waited.total.rounds - 1));
  // Where rounds are dear, states measure less, so fewer rounds run.
  EXPECT_LT(waited.total.rounds, covered.total.rounds);

  s.round_cost_us = 100;
  const SimResult fixed = run_scenario(s);
  EXPECT_NEAR(fixed.total.rounds_us, 100.0 * static_cast<double>(fixed.total.rounds), 100.0);
}

}  // namespace
}  // namespace sim
}  // namespace dynamiccl
