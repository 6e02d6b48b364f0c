// Chunk-size arms (NCCL >= 2.30): offered by the NCCL catalog only for such an NCCL, named and
// parsed by one pair, and priced by the cost model without moving any chunk-less figure.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engines/nccl/arm_catalog.h"
#include "nccl_model/cost_model.h"
#include "nccl_model/topology.h"

namespace dynamiccl {
namespace {

using namespace nccl;

TopologySpec h100(int nodes) {
  TopologySpec t;
  t.nodes = nodes;
  t.gpus_per_node = 8;
  t.gpu = "hopper";
  t.intra = {"nvlink", 450.0, 0.0};
  t.inter = {"ib", 50.0, 2.0};
  return t;
}

NcclArmCatalog catalog(int nccl_version) {
  return nccl_catalog_for(resolve_topology(h100(2)), GroupShape{2, 8}, {}, true, nccl_version);
}

std::set<std::string> chunk_arm_names(const NcclArmCatalog& cat, OpKind op) {
  std::set<std::string> out;
  for (const Arm& a : cat.arms(op)) {
    if (a.action.chunk_bytes > 0) out.insert(a.name);
  }
  return out;
}

TEST(NcclChunkArms, OfferedOnlyFromNccl230) {
  for (int version : {0, 22100, 22800, 22907}) {
    const NcclArmCatalog cat = catalog(version);
    EXPECT_FALSE(cat.chunks_offered()) << version;
    for (int o = 0; o < kNumOps; ++o) {
      EXPECT_TRUE(chunk_arm_names(cat, static_cast<OpKind>(o)).empty()) << version;
    }
  }
  const NcclArmCatalog older = catalog(22800);
  for (int version : {23000, 23007, 30000}) {
    const NcclArmCatalog cat = catalog(version);
    EXPECT_TRUE(cat.chunks_offered()) << version;
    const std::set<std::string> names = chunk_arm_names(cat, OpKind::kAllReduce);
    for (const char* want : {"ring/Simple/k256K", "ring/Simple/k128K", "ring/LL128/k300K",
                             "ring/LL128/k150K", "tree/Simple/k256K", "tree/LL128/k150K"}) {
      EXPECT_TRUE(names.count(want)) << want << " at " << version;
    }
    // The older catalog's arms come first, in the same order: chunk arms only add.
    for (int o = 0; o < kNumOps; ++o) {
      const auto& before = older.arms(static_cast<OpKind>(o));
      const auto& after = cat.arms(static_cast<OpKind>(o));
      ASSERT_GE(after.size(), before.size());
      EXPECT_LE(after.size(), before.size() + 8u);  // 2 algorithms x 2 protocols x 2 chunks
      for (size_t i = 0; i < after.size(); ++i) {
        if (i < before.size()) {
          EXPECT_EQ(after[i].name, before[i].name);
        } else {
          EXPECT_GT(after[i].action.chunk_bytes, 0) << after[i].name;
        }
      }
    }
  }
}

TEST(NcclChunkArms, EveryChunkArmIsValidForItsProtocolAndParsesBack) {
  const NcclArmCatalog cat = catalog(23000);
  for (int o = 0; o < kNumOps; ++o) {
    for (const Arm& arm : cat.arms(static_cast<OpKind>(o))) {
      if (arm.action.chunk_bytes <= 0) continue;
      EXPECT_TRUE(arm.action.algo == kAlgoRing || arm.action.algo == kAlgoTree) << arm.name;
      EXPECT_NE(arm.action.proto, kProtoLL) << arm.name;
      EXPECT_TRUE(
          dynamiccl_nccl_chunk_valid(arm.action.proto, static_cast<size_t>(arm.action.chunk_bytes)))
          << arm.name;
      EXPECT_LT(static_cast<size_t>(arm.action.chunk_bytes), default_chunk_bytes(arm.action.proto));
      Action got;
      ASSERT_TRUE(parse_nccl_arm_name(arm.name, &got)) << arm.name;
      EXPECT_EQ(got.algo, arm.action.algo);
      EXPECT_EQ(got.proto, arm.action.proto);
      EXPECT_EQ(got.channels, arm.action.channels);
      EXPECT_EQ(got.chunk_bytes, arm.action.chunk_bytes) << arm.name;
      EXPECT_FALSE(got.is_default());
    }
  }
}

TEST(NcclChunkArms, NamesWithAChunkParseAndBadChunksAreRefused) {
  Action a;
  ASSERT_TRUE(parse_nccl_arm_name("ring/Simple/c8/k256K", &a));
  EXPECT_EQ(a.channels, 8);
  EXPECT_EQ(a.chunk_bytes, 256 * 1024);
  EXPECT_EQ(nccl_arm_name(a.algo, a.proto, a.channels, a.chunk_bytes), "ring/Simple/c8/k256K");
  ASSERT_TRUE(parse_nccl_arm_name("ring/Simple", &a));
  EXPECT_EQ(a.chunk_bytes, -1);
  for (const char* bad :
       {"ring/Simple/k255K", "ring/Simple/k256", "ring/Simple/256K", "ring/Simple/k256K/c8",
        "ring/Simple/kK", "ring/Simple/k0K", "ring/Simple/k1024K", "ring/LL128/k256K",
        "ring/Simple/k-256K", "ring/Simple/k256K/k128K", "ring/Simple/c8/k256K/x"}) {
    EXPECT_FALSE(parse_nccl_arm_name(bad, &a)) << bad;
  }
}

TEST(NcclChunkCostModel, DefaultChunkIsTheChunklessModelAndSmallerChunksPipelineLargeCalls) {
  const NcclCostModel m(derive_comm_inputs(resolve_topology(h100(2)), GroupShape{2, 8}));
  const Action ring{static_cast<int8_t>(kAlgoRing), static_cast<int8_t>(kProtoSimple), -1};
  Action half = ring;
  half.chunk_bytes = static_cast<int32_t>(default_chunk_bytes(kProtoSimple) / 2);
  Action same = ring;
  same.chunk_bytes = static_cast<int32_t>(default_chunk_bytes(kProtoSimple));
  for (uint64_t b : {8ull, 1ull << 16, 1ull << 20, 1ull << 26, 1ull << 30}) {
    const double t = m.predict_us(OpKind::kAllReduce, ring, b);
    // The protocol's own chunk changes nothing (the chunk-less figure is bit for bit the same).
    EXPECT_EQ(m.predict_us(OpKind::kAllReduce, same, b), t) << b;
    const double h = m.predict_us(OpKind::kAllReduce, half, b);
    if (b <= (1ull << 20)) {
      EXPECT_EQ(h, t) << b;  // a channel's share fits one chunk either way
    }
    if (b >= (1ull << 30)) {
      EXPECT_LT(h, t) << b;  // a faster pipeline fill outweighs the extra steps
    }
  }
  EXPECT_EQ(NcclCostModel::chunk_delta_us(kProtoSimple, -1, 1ull << 30, 16, 16, 100.0, 15), 0.0);
  EXPECT_EQ(NcclCostModel::chunk_delta_us(kProtoSimple, 128 << 10, 0, 16, 16, 100.0, 15), 0.0);
  EXPECT_LT(NcclCostModel::chunk_delta_us(kProtoSimple, 128 << 10, 1ull << 30, 16, 16, 100.0, 15),
            0.0);
  // Tiny chunks on a large call pay more in steps than they save.
  EXPECT_GT(NcclCostModel::chunk_delta_us(kProtoSimple, 1 << 10, 1ull << 30, 16, 16, 100.0, 15),
            0.0);
}

}  // namespace
}  // namespace dynamiccl
