// One decision stack: the backend's NCCL engine and the simulator offer the learner the same
// catalog — the same type, the same arms, the same prior — for the same topology and group.
#include <gtest/gtest.h>

#include "backend/null_engine.h"
#include "backend/process_group_dynamiccl.h"
#include "engines/nccl/arm_catalog.h"
#include "sim/runner.h"

namespace dynamiccl {
namespace {

using testing::NullEngine;

nccl::TopologySpec two_nodes_of_four() {
  nccl::TopologySpec t;
  t.nodes = 2;
  t.gpus_per_node = 4;
  t.gpu = "ampere";
  t.intra = {"nvlink", 240.0, 0.0};
  t.inter = {"ib", 25.0, 2.0};
  return t;
}

TEST(OneCatalog, BackendAndSimulatorOfferTheSameNcclArms) {
  BackendConfig cfg;
  cfg.nccl_topology = two_nodes_of_four();
  cfg.nccl_group = nccl::GroupShape{2, 4};
  // One rank stands for the group: the catalog depends on the described group, not on size_.
  auto pg = c10::make_intrusive<ProcessGroupDynamicCCL>(
      0, 1,
      ProcessGroupDynamicCCL::Engines{c10::make_intrusive<NullEngine>(),
                                      c10::make_intrusive<NullEngine>()},
      cfg, std::chrono::seconds(10));

  sim::ScenarioSpec s;
  s.name = "same";
  s.topology = two_nodes_of_four();
  sim::WorkloadSpec call;
  call.role = "dp";
  call.op = "allreduce";
  call.bytes = 1 << 20;
  s.workload = {call};
  const sim::SimRunner runner(s);

  const auto* backend = dynamic_cast<const NcclArmCatalog*>(pg->catalog(EngineKind::kNccl));
  const auto* simulated = dynamic_cast<const NcclArmCatalog*>(&runner.catalog("dp"));
  ASSERT_NE(backend, nullptr);
  ASSERT_NE(simulated, nullptr);
  EXPECT_EQ(backend->caps(), simulated->caps());
  for (int o = 0; o < kNumOps; ++o) {
    const auto op = static_cast<OpKind>(o);
    const auto& a = backend->arms(op);
    const auto& b = simulated->arms(op);
    ASSERT_EQ(a.size(), b.size()) << op_name(op);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      for (uint64_t bytes : {uint64_t{4}, uint64_t{1} << 16, uint64_t{1} << 26}) {
        EXPECT_EQ(backend->prior_cost_us(op, i, bytes, 8),
                  simulated->prior_cost_us(op, i, bytes, 8))
            << a[i].name << " at " << bytes;
      }
    }
  }
  EXPECT_GT(backend->arms(OpKind::kAllReduce).size(), 6u);  // ring, tree x protocols, caps
}

}  // namespace
}  // namespace dynamiccl
