// The simulator's NCCL cost model: shape (monotonic in bytes), NCCL 2.28's crossovers computed
// by hand from its tables, availability rules, the truth's perturbations and the arm catalog.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "engines/nccl/arm_catalog.h"
#include "nccl_model/cost_model.h"
#include "nccl_model/topology.h"
#include "sim/workload.h"
#include "truth/truth.h"

namespace dynamiccl {
namespace sim {
namespace {

TopologySpec h100(int nodes, int gpus = 8) {
  TopologySpec t;
  t.nodes = nodes;
  t.gpus_per_node = gpus;
  t.gpu = "hopper";
  t.intra = {"nvlink", 450.0, 0.0};
  t.inter = {"ib", 50.0, 2.0};
  return t;
}

NcclCostModel model(const TopologySpec& spec, GroupShape g = {0, 0}) {
  const Topology topo = resolve_topology(spec);
  if (g.nodes == 0) g = {topo.nodes, topo.gpus_per_node};
  return NcclCostModel(derive_comm_inputs(topo, g));
}

std::string pick_name(const NcclCostModel& m, int func, uint64_t bytes) {
  int a = -1, p = -1;
  if (!m.pick(func, bytes, &a, &p)) return "none";
  return nccl_arm_name(a, p, 0);
}

// Byte counts from 1 B to 8 GiB: every power of two and three points inside each bin.
std::vector<uint64_t> byte_grid() {
  std::vector<uint64_t> out;
  for (int k = 0; k <= 33; ++k) {
    const uint64_t b = 1ull << k;
    for (uint64_t q : {b, b + b / 4, b + b / 2, b + 3 * b / 4}) {
      if (out.empty() || q > out.back()) out.push_back(q);
    }
  }
  return out;
}

// Arm names are written (nccl_arm_name) and read (parse_nccl_arm_name, policy files) by one pair.
TEST(NcclArmNames, ParsingInvertsTheNameOfEveryArmAndRefusesOthers) {
  const NcclArmCatalog cat = nccl_catalog_for(resolve_topology(h100(2)), GroupShape{2, 8});
  for (int o = 0; o < kNumOps; ++o) {
    for (const Arm& arm : cat.arms(static_cast<OpKind>(o))) {
      if (arm.name == "default") continue;
      Action got;
      ASSERT_TRUE(parse_nccl_arm_name(arm.name, &got)) << arm.name;
      EXPECT_EQ(got.algo, arm.action.algo) << arm.name;
      EXPECT_EQ(got.proto, arm.action.proto) << arm.name;
      EXPECT_EQ(got.channels, arm.action.channels) << arm.name;
    }
  }
  Action unused;
  for (const char* bad :
       {"", "default", "ring", "ring/", "warp/LL", "ring/LL256", "ring/LL/c", "ring/LL/c0",
        "ring/LL/c65", "ring/LL/x4", "ring/LL/c4/c2", "ring/LL/c+4"}) {
    EXPECT_FALSE(parse_nccl_arm_name(bad, &unused)) << bad;
  }
}

TEST(SimModel, TimeIsMonotonicInBytes) {
  std::vector<std::pair<TopologySpec, GroupShape>> cases = {{h100(1), {1, 8}},
                                                            {h100(4), {4, 8}},
                                                            {h100(128), {128, 8}},
                                                            {h100(16), {16, 1}},
                                                            {h100(12500), {12500, 8}}};
  TopologySpec pcie = h100(1);
  pcie.gpu = "ampere";
  pcie.intra = {"pcie", 24.0, 1.0};
  cases.push_back({pcie, {1, 8}});
  for (const auto& [spec, shape] : cases) {
    const NcclCostModel m = model(spec, shape);
    for (int f = 0; f < kNumFuncs; ++f) {
      for (int a = 0; a < kNumAlgos; ++a) {
        for (int p = 0; p < kNumProtos; ++p) {
          if (!m.available(f, a, p)) continue;
          // NCCL's tree all-reduce correction is piecewise constant per power of two and can
          // rise between bins, so that one pair is monotonic within each bin only.
          const bool per_bin = a == kAlgoTree && f == kFuncAllReduce;
          double prev = -1;
          int prev_bin = -1;
          for (uint64_t b : byte_grid()) {
            const double t = m.time_us(f, a, p, b);
            ASSERT_GT(t, 0) << nccl_arm_name(a, p, 0) << " f=" << f << " b=" << b;
            ASSERT_TRUE(std::isfinite(t));
            const int bin = size_bin(b >> 6);
            if (prev >= 0 && (!per_bin || bin == prev_bin))
              EXPECT_GE(t, prev) << nccl_arm_name(a, p, 0) << " f=" << f << " bytes=" << b
                                 << " ranks=" << shape.ranks();
            prev = t;
            prev_bin = bin;
          }
        }
      }
    }
  }
}

// One H100 node, 16 channels of 450/16 GB/s (NCCL 2.28 tables, hand-computed):
//   ring/LL   lat 6.6 + 14*0.6 = 15.0 us,  algbw min(141, 225) * 8/14 = 80.57 GB/s
//   NVLS      lat 25 us,  algbw 16 * 28.125*0.85*15/16*2 * 8/14 = 409.8 GB/s
// -> crossover at 10 us / (1/80.57 - 1/409.8) us per kB = 1.003 MB.
TEST(SimModel, SingleNodeNvlsCrossoverWhereTheTablesPutIt) {
  const NcclCostModel m = model(h100(1));
  EXPECT_NEAR(m.time_us(kFuncAllReduce, kAlgoRing, kProtoLL, 0), 15.0, 1e-3);
  EXPECT_NEAR(m.base_latency(kFuncAllReduce, kAlgoNvls, kProtoSimple), 25.0, 1e-3);
  EXPECT_NEAR(m.base_bandwidth(kFuncAllReduce, kAlgoRing, kProtoLL), 80.571, 1e-2);
  EXPECT_NEAR(m.base_bandwidth(kFuncAllReduce, kAlgoNvls, kProtoSimple), 409.8, 0.1);
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 8), "ring/LL");
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 950000), "ring/LL");
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 1060000), "nvls/Simple");
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 1ull << 30), "nvls/Simple");
}

// Without NVSwitch: LL -> LL128 at 25.6 us / (1/80.57 - 1/236.6) = 3.13 MB, LL128 -> Simple at
// (56.0 - 40.6) / (1/236.6 - 1/257.1) = 45.7 MB (ring; tree is never cheaper on one node).
TEST(SimModel, SingleNodeProtocolCrossoversWhereTheTablesPutThem) {
  TopologySpec spec = h100(1);
  spec.nvswitch = false;
  const NcclCostModel m = model(spec);
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 3000000), "ring/LL");
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 3300000), "ring/LL128");
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 44000000), "ring/LL128");
  EXPECT_EQ(pick_name(m, kFuncAllReduce, 48000000), "ring/Simple");
}

TEST(SimModel, TreeWinsSmallAndRingLosesAtScale) {
  // Across nodes the tree's log-depth latency wins small messages; at 1,024 ranks the ring's
  // 2046 steps keep it out of reach for any realistic size (NCCL's crossover is tens of GB).
  const NcclCostModel m4 = model(h100(4));
  EXPECT_EQ(pick_name(m4, kFuncAllReduce, 8), "tree/LL");
  TopologySpec big = h100(128);
  big.nvswitch = false;
  const NcclCostModel m = model(big);
  for (uint64_t b : {8ull, 1ull << 20, 1ull << 26, 1ull << 30})
    EXPECT_EQ(pick_name(m, kFuncAllReduce, b).rfind("tree/", 0), 0u) << b;
  EXPECT_GT(m.time_us(kFuncAllReduce, kAlgoRing, kProtoSimple, 8), 5000.0);
}

TEST(SimModel, AvailabilityFollowsNcclRules) {
  const NcclCostModel one = model(h100(1));
  EXPECT_FALSE(one.available(kFuncAllReduce, kAlgoNvlsTree, kProtoSimple));  // one node
  EXPECT_TRUE(one.available(kFuncAllReduce, kAlgoNvls, kProtoSimple));
  EXPECT_FALSE(one.available(kFuncAllReduce, kAlgoNvls, kProtoLL));     // NVLS: Simple only
  EXPECT_FALSE(one.available(kFuncAllGather, kAlgoPat, kProtoSimple));  // > 1 GPU per node
  EXPECT_FALSE(one.available(kFuncBroadcast, kAlgoTree, kProtoLL));     // broadcast: ring only
  EXPECT_TRUE(one.available(kFuncBroadcast, kAlgoRing, kProtoLL128));
  EXPECT_FALSE(one.available(kFuncAllReduce, kAlgoCollNetDirect, kProtoSimple));  // no SHARP

  const NcclCostModel multi = model(h100(4));
  EXPECT_TRUE(multi.available(kFuncAllReduce, kAlgoNvlsTree, kProtoSimple));
  EXPECT_FALSE(multi.available(kFuncAllReduce, kAlgoNvls, kProtoSimple));  // needs CollNet
  EXPECT_FALSE(multi.available(kFuncAllGather, kAlgoNvls, kProtoSimple));

  TopologySpec sharp = h100(4);
  sharp.sharp = true;
  const NcclCostModel s = model(sharp);
  EXPECT_TRUE(s.available(kFuncAllReduce, kAlgoCollNetDirect, kProtoSimple));
  EXPECT_TRUE(s.available(kFuncAllReduce, kAlgoCollNetChain, kProtoSimple));
  EXPECT_FALSE(s.available(kFuncAllReduce, kAlgoCollNetChain, kProtoLL128));

  const NcclCostModel pat = model(h100(16), {16, 1});
  EXPECT_TRUE(pat.available(kFuncAllGather, kAlgoPat, kProtoSimple));
  EXPECT_FALSE(pat.available(kFuncAllReduce, kAlgoPat, kProtoSimple));

  TopologySpec pcie = h100(1);
  pcie.gpu = "ampere";
  pcie.intra = {"pcie", 24.0, 0.0};
  const NcclCostModel pc = model(pcie);
  EXPECT_FALSE(pc.available(kFuncAllReduce, kAlgoRing, kProtoLL128));  // LL128 needs NVLink
  EXPECT_FALSE(pc.available(kFuncAllReduce, kAlgoNvls, kProtoSimple));
  EXPECT_TRUE(pc.available(kFuncAllReduce, kAlgoRing, kProtoSimple));
}

TEST(SimModel, LargestScaleStaysFinite) {
  const NcclCostModel m = model(h100(12500));
  int a, p;
  ASSERT_TRUE(m.pick(kFuncAllReduce, 1ull << 28, &a, &p));
  const double t = m.time_us(kFuncAllReduce, a, p, 1ull << 28);
  EXPECT_TRUE(std::isfinite(t));
  EXPECT_GT(t, 0);
  EXPECT_EQ(derive_comm_inputs(resolve_topology(h100(12500)), {12500, 8}).n_ranks, 100000);
}

TEST(SimTruth, WithoutPerturbationTruthEqualsNominal) {
  const Topology topo = resolve_topology(h100(4));
  const GroupWorld w(topo, {4, 8}, TruthFactors(), ChannelModelSpec());
  for (uint64_t b : {8ull, 65536ull, 1ull << 24, 1ull << 30}) {
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        const Action act{static_cast<int8_t>(a), static_cast<int8_t>(p), -1};
        const double nom = w.nominal().predict_us(OpKind::kAllReduce, act, b);
        if (nom < 0) continue;
        EXPECT_DOUBLE_EQ(w.truth_us(OpKind::kAllReduce, act, b), nom) << nccl_arm_name(a, p, 0);
      }
    }
    EXPECT_DOUBLE_EQ(w.truth_us(OpKind::kAllReduce, Action{}, b),
                     w.nominal().predict_us(OpKind::kAllReduce, Action{}, b));
  }
}

TEST(SimTruth, AlgoProtoFactorsScaleLatencyAndBandwidth) {
  const Topology topo = resolve_topology(h100(4));
  std::vector<TruthEntry> entries = {{"tree", "*", 0.5, 2.0}, {"*", "LL128", 0.8, 1.0}};
  const GroupWorld w(topo, {4, 8}, TruthFactors::from_entries(entries), ChannelModelSpec());
  const NcclCostModel& m = w.nominal();
  const uint64_t b = 1ull << 24;
  ModelTerms t;
  ASSERT_TRUE(m.terms(kFuncAllReduce, kAlgoTree, kProtoLL128, b, &t));
  const Action tree_ll128{kAlgoTree, kProtoLL128, -1};
  // Both entries match tree/LL128: factors multiply.
  EXPECT_NEAR(w.truth_us(OpKind::kAllReduce, tree_ll128, b),
              2.0 * t.lat_us + b / (1000.0 * t.bw_GBps * 0.5 * 0.8), 1e-6);
  const Action ring_simple{kAlgoRing, kProtoSimple, -1};
  EXPECT_DOUBLE_EQ(w.truth_us(OpKind::kAllReduce, ring_simple, b),
                   w.nominal().predict_us(OpKind::kAllReduce, ring_simple, b));
  EXPECT_THROW(TruthFactors::from_entries({{"trees", "*", 1, 1}}), std::invalid_argument);
  EXPECT_THROW(TruthFactors::from_entries({{"ring", "LL256", 1, 1}}), std::invalid_argument);
  EXPECT_THROW(TruthFactors::from_entries({{"ring", "LL", 0, 1}}), std::invalid_argument);
}

TEST(SimTruth, CongestionCutsOnlyItsLinkClass) {
  const Topology topo = resolve_topology(h100(4));
  GroupWorld multi(topo, {4, 8}, TruthFactors(), ChannelModelSpec());
  GroupWorld intra(topo, {1, 8}, TruthFactors(), ChannelModelSpec());
  const Action ring{kAlgoRing, kProtoSimple, -1};
  const uint64_t b = 1ull << 34;  // bandwidth-dominated: latency is < 1% of the time
  const double multi_before = multi.truth_us(OpKind::kAllReduce, ring, b);
  const double intra_before = intra.truth_us(OpKind::kAllReduce, ring, b);
  LinkScale s;
  s.inter_bw = 0.5;
  multi.set_link_scale(s);
  intra.set_link_scale(s);
  EXPECT_NEAR(multi.truth_us(OpKind::kAllReduce, ring, b) / multi_before, 2.0, 0.02);
  EXPECT_DOUBLE_EQ(intra.truth_us(OpKind::kAllReduce, ring, b), intra_before);
  // NCCL's belief does not move with congestion: the default keeps its pick.
  EXPECT_DOUBLE_EQ(multi.nominal().predict_us(OpKind::kAllReduce, ring, b),
                   GroupWorld(topo, {4, 8}, TruthFactors(), ChannelModelSpec())
                       .nominal()
                       .predict_us(OpKind::kAllReduce, ring, b));
}

TEST(SimTruth, ChannelModelRewardsCapsOnlyWhenTheLinkSaturates) {
  TopologySpec spec = h100(1);
  spec.gpu = "ampere";
  spec.intra = {"pcie", 24.0, 0.0};
  spec.channels = 4;
  const Topology topo = resolve_topology(spec);
  const uint64_t b = 1ull << 26;
  const Action full{kAlgoRing, kProtoSimple, -1}, one{kAlgoRing, kProtoSimple, 1};
  const GroupWorld linear(topo, {1, 8}, TruthFactors(), ChannelModelSpec());
  EXPECT_GT(linear.truth_us(OpKind::kAllReduce, one, b),
            3.5 * linear.truth_us(OpKind::kAllReduce, full, b));
  ChannelModelSpec sat;
  sat.saturation = 0.25;
  sat.contention = 0.6;
  const GroupWorld saturated(topo, {1, 8}, TruthFactors(), sat);
  // One channel fills the link; four contend (1 - 0.6 * 3/4 = 55% of the bandwidth).
  const double t1 = saturated.truth_us(OpKind::kAllReduce, one, b);
  const double t4 = saturated.truth_us(OpKind::kAllReduce, full, b);
  EXPECT_LT(t1, t4);
  EXPECT_NEAR(t1, linear.truth_us(OpKind::kAllReduce, full, b), 1e-6);
}

TEST(NcclCatalog, ArmsDefaultFirstUniqueAndPriorsFromTheModel) {
  const Topology topo = resolve_topology(h100(4));
  const NcclArmCatalog cat = nccl_catalog_for(topo, GroupShape{4, 8});
  const std::vector<Arm>& arms = cat.arms(OpKind::kAllReduce);
  ASSERT_GT(arms.size(), 5u);
  EXPECT_EQ(arms[0].name, "default");
  EXPECT_TRUE(arms[0].action.is_default());
  std::set<std::string> names;
  for (const Arm& a : arms) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    if (a.action.channels > 0) {
      EXPECT_NE(a.action.proto, kProtoLL) << a.name;  // no caps on LL
      EXPECT_LT(a.action.channels, 16);
    }
  }
  EXPECT_TRUE(names.count("tree/LL"));
  EXPECT_TRUE(names.count("nvls_tree/Simple"));
  EXPECT_TRUE(names.count("ring/Simple/c4"));
  EXPECT_TRUE(names.count("ring/LL128/c8"));
  // Default's prior = NCCL's own prediction for its pick = the best uncapped prior.
  for (uint64_t b : {8ull, 1ull << 20, 1ull << 28}) {
    double best = 1e300;
    for (uint16_t i = 1; i < arms.size(); ++i)
      best = std::min(best, cat.prior_cost_us(OpKind::kAllReduce, i, b, 32));
    EXPECT_DOUBLE_EQ(cat.prior_cost_us(OpKind::kAllReduce, 0, b, 32), best);
  }
  EXPECT_EQ(cat.arms(OpKind::kSend).size(), 1u);
  EXPECT_EQ(cat.arms(OpKind::kBroadcast).size(), 1u + 3u + 2u * 2u);  // ring x 3 protos + caps
  const NcclArmCatalog no_caps = nccl_catalog_for(topo, GroupShape{4, 8}, {}, false);
  for (const Arm& a : no_caps.arms(OpKind::kAllReduce)) EXPECT_LT(a.action.channels, 1);
}

TEST(SimWorkload, DdpBucketsFollowTorchsRule) {
  const uint64_t mib = 1 << 20;
  // Reverse order; a bucket closes once it reaches its cap; the first cap is 1 MiB.
  const std::vector<uint64_t> params = {10 * mib, 10 * mib, 10 * mib, 10 * mib, 10 * mib, mib / 2};
  const std::vector<uint64_t> b = ddp_buckets(params, 25 * mib, mib);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], mib / 2 + 10 * mib);
  EXPECT_EQ(b[1], 30 * mib);
  EXPECT_EQ(b[2], 10 * mib);
}

TEST(SimWorkload, GeneratorsEmitRolesGroupsAndOrder) {
  ScenarioSpec s;
  s.topology = h100(4);
  s.microbatches = 2;
  WorkloadSpec fsdp;
  fsdp.kind = "fsdp";
  fsdp.layers = 3;
  fsdp.layer_bytes = 1 << 24;
  WorkloadSpec tp;
  tp.kind = "tp";
  tp.layers = 3;
  tp.activation_bytes = 1 << 20;
  WorkloadSpec pp;
  pp.kind = "pp";
  pp.activation_bytes = 1 << 22;
  s.workload = {fsdp, tp, pp};
  const Workload w = build_workload(s);
  ASSERT_EQ(w.groups.size(), 3u);
  EXPECT_EQ(w.groups[0].name, "dp");
  EXPECT_EQ(w.groups[0].shape.ranks(), 32);
  EXPECT_EQ(w.groups[1].name, "tp");
  EXPECT_EQ(w.groups[1].shape.nodes, 1);
  EXPECT_EQ(w.groups[2].shape.ranks(), 2);
  int ag = 0, rs = 0, ar = 0, send = 0;
  for (const CallSite& c : w.calls) {
    ag += c.ctx.op == OpKind::kAllGather;
    rs += c.ctx.op == OpKind::kReduceScatter;
    ar += c.ctx.op == OpKind::kAllReduce;
    send += c.ctx.op == OpKind::kSend;
    if (c.ctx.op == OpKind::kAllGather) {
      EXPECT_EQ(c.ctx.role, Role::kFsdpAllGather);
      EXPECT_EQ(c.ctx.group_size, 32);
    }
    if (c.ctx.op == OpKind::kReduceScatter) EXPECT_EQ(c.ctx.role, Role::kFsdpReduceScatter);
    if (c.ctx.op == OpKind::kAllReduce) EXPECT_EQ(c.ctx.role, Role::kTensorParallel);
  }
  EXPECT_EQ(ag, 2 * (3 + 3));  // per microbatch: forward and (resharded) backward unshard
  EXPECT_EQ(rs, 2 * 3);
  EXPECT_EQ(ar, 2 * 2 * 3 * 2);  // microbatches x directions x layers x calls per layer
  EXPECT_EQ(send, 2 * 2);
  // The first call of the step is the first layer's unshard, the last a backward send or RS.
  EXPECT_EQ(w.calls.front().ctx.op, OpKind::kAllGather);
  EXPECT_NE(w.calls.back().ctx.op, OpKind::kAllGather);
}

TEST(SimWorkload, BadEntriesNameTheProblem) {
  ScenarioSpec s;
  s.topology = h100(2);
  WorkloadSpec call;
  call.role = "tp";
  call.op = "allreduce";
  call.bytes = 64;
  call.group.nodes = 3;
  s.workload = {call};
  try {
    build_workload(s);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workload[0].group.nodes: 3 exceeds topology.nodes (2)"),
              std::string::npos)
        << e.what();
  }
  s.workload[0].group.nodes = 0;
  s.workload[0].op = "alltoall";
  EXPECT_THROW(build_workload(s), std::invalid_argument);
  TopologySpec bad = h100(1);
  bad.intra.type = "infiniband";
  EXPECT_THROW(resolve_topology(bad), std::invalid_argument);
}

}  // namespace
}  // namespace sim
}  // namespace dynamiccl
