// The NCCL catalog's footprint: the channels an arm's call uses over those of NCCL's own choice,
// which is what overlapped states descend on (docs/learner.md, "Footprint trials").
#include <gtest/gtest.h>

#include <string>

#include "engines/nccl/arm_catalog.h"
#include "nccl_model/topology.h"

namespace dynamiccl {
namespace {

using namespace nccl;

NcclArmCatalog one_node_of_eight() {
  TopologySpec t;
  t.nodes = 1;
  t.gpus_per_node = 8;
  t.gpu = "hopper";
  t.intra = {"nvlink", 450.0, 0.0};
  t.channels = 32;
  return nccl_catalog_for(resolve_topology(t), GroupShape{1, 8});
}

double footprint_of(const NcclArmCatalog& cat, const std::string& name, uint64_t bytes) {
  const std::vector<Arm>& arms = cat.arms(OpKind::kAllReduce);
  for (size_t i = 0; i < arms.size(); ++i) {
    if (arms[i].name == name)
      return cat.footprint(OpKind::kAllReduce, static_cast<uint16_t>(i), bytes);
  }
  ADD_FAILURE() << name << " is not an arm";
  return -1;
}

TEST(NcclFootprint, AChannelCapHoldsItsShareOfTheDefaultsChannels) {
  const NcclArmCatalog cat = one_node_of_eight();
  const uint64_t big = 64ull << 20;  // large enough that NCCL uses every channel
  EXPECT_DOUBLE_EQ(footprint_of(cat, "default", big), 1.0);
  EXPECT_DOUBLE_EQ(footprint_of(cat, "ring/Simple", big), 1.0);
  EXPECT_DOUBLE_EQ(footprint_of(cat, "ring/Simple/c16", big), 0.5);
  EXPECT_DOUBLE_EQ(footprint_of(cat, "ring/Simple/c8", big), 0.25);
}

TEST(NcclFootprint, SmallCallsUseFewChannelsWhateverTheCap) {
  const NcclArmCatalog cat = one_node_of_eight();
  // NCCL shrinks the channels of a small call below any cap: the cap frees nothing.
  EXPECT_DOUBLE_EQ(footprint_of(cat, "ring/Simple/c8", 4096),
                   footprint_of(cat, "ring/Simple", 4096));
}

TEST(NcclFootprint, OpsOutsideTheTunerHoldWhatTheDefaultHolds) {
  const NcclArmCatalog cat = one_node_of_eight();
  EXPECT_DOUBLE_EQ(cat.footprint(OpKind::kSend, 0, 1 << 20), 1.0);
  EXPECT_DOUBLE_EQ(cat.footprint(OpKind::kAllReduce, 60000, 1 << 20), 1.0);  // no such arm
}

}  // namespace
}  // namespace dynamiccl
