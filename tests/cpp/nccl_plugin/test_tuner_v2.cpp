// Tuner ABI v2 (NCCL 2.21): direct algorithm/protocol outputs that NCCL does not re-check,
// so the plugin only writes pairs NCCL's model offers and otherwise keeps NCCL's -1.
#include <cstdlib>

#include "plugin_under_test.h"

namespace dynamiccl {
namespace testing {
namespace {

constexpr size_t kBytes = 4 << 20;

struct V2Call {
  int algorithm = -1;  // NCCL pre-sets -1 (undefined) and 0 channels
  int protocol = -1;
  int n_channels = 0;
};

class PluginTunerV2Test : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    ASSERT_NE(plugin().v2(), nullptr);
    ctx_ = init(/*n_nodes=*/2);
  }
  void TearDown() override { EXPECT_EQ(plugin().v2()->destroy(ctx_), ncclSuccess); }

  static void* init(size_t n_nodes) {
    void* ctx = nullptr;
    EXPECT_EQ(plugin().v2()->init(16, n_nodes, nullptr, &ctx), ncclSuccess);
    EXPECT_NE(ctx, nullptr);
    return ctx;
  }

  V2Call call(void* ctx, int coll = DYNAMICCL_NCCL_COLL_ALLREDUCE, size_t bytes = kBytes,
              int collnet = 0, int nvls = 0) {
    V2Call c;
    EXPECT_EQ(plugin().v2()->getCollInfo(ctx, static_cast<ncclFunc_t>(coll), bytes, collnet, nvls,
                                         1, &c.algorithm, &c.protocol, &c.n_channels),
              ncclSuccess);
    return c;
  }
  V2Call call(int coll = DYNAMICCL_NCCL_COLL_ALLREDUCE, size_t bytes = kBytes, int collnet = 0,
              int nvls = 0) {
    return call(ctx_, coll, bytes, collnet, nvls);
  }

  void expect_untouched(const V2Call& c) {
    EXPECT_EQ(c.algorithm, -1);
    EXPECT_EQ(c.protocol, -1);
    EXPECT_EQ(c.n_channels, 0);
  }

  void* ctx_ = nullptr;
};

TEST_F(PluginTunerV2Test, ForcedPairAndChannelsAreWritten) {
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_LL, 6);
  const V2Call c = call();
  EXPECT_EQ(c.algorithm, DYNAMICCL_NCCL_ALGO_TREE);
  EXPECT_EQ(c.protocol, DYNAMICCL_NCCL_PROTO_LL);
  EXPECT_EQ(c.n_channels, 6);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
}

TEST_F(PluginTunerV2Test, NothingPublishedKeepsNcclDefaults) {
  expect_untouched(call());
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_ABSTAINED);
}

// NCCL 2.21 asks about a lone collective twice (aggregate, then the task for channels).
TEST_F(PluginTunerV2Test, RepeatedQueryForTheSameCallIsAnsweredAndCountedOnce) {
  const auto counters = plugin().counters();
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 5);
  const V2Call aggregate = call();
  const V2Call task = call();
  EXPECT_EQ(aggregate.algorithm, DYNAMICCL_NCCL_ALGO_RING);
  EXPECT_EQ(task.n_channels, 5);
  EXPECT_EQ(plugin().counters().applied, counters.applied + 1);
  plugin().clear();
  expect_untouched(call());
}

// A published (collective, algorithm, protocol) and what the communicator offers (CollNet, NVLS).
struct PairCase {
  int coll, algo, proto, collnet, nvls;
};

TEST_F(PluginTunerV2Test, PairsNcclDoesNotOfferAreRefused) {
  const PairCase refused[] = {
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_LL128, 1, 1},
      {DYNAMICCL_NCCL_COLL_BROADCAST, DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE, 1, 1},
      {DYNAMICCL_NCCL_COLL_REDUCE, DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_LL, 1, 1},
      {DYNAMICCL_NCCL_COLL_ALLGATHER, DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE, 1, 1},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_SIMPLE, 1, 0},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_LL, 1, 1},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_COLLNET_DIRECT,
       DYNAMICCL_NCCL_PROTO_SIMPLE, 0, 1},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_PAT, DYNAMICCL_NCCL_PROTO_SIMPLE, 1, 1},
      {DYNAMICCL_NCCL_COLL_ALLGATHER, DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_SIMPLE, 1, 1},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_RING, -1, 1, 1},  // v2 needs both
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, -1, DYNAMICCL_NCCL_PROTO_LL, 1, 1},
  };
  for (const PairCase& k : refused) {
    plugin().publish(k.coll, kBytes, k.algo, k.proto, 8);
    expect_untouched(call(k.coll, kBytes, k.collnet, k.nvls));
    EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE)
        << "coll " << k.coll << " algo " << k.algo << " proto " << k.proto;
  }
}

TEST_F(PluginTunerV2Test, PairsNcclOffersAreAccepted) {
  const PairCase accepted[] = {
      {DYNAMICCL_NCCL_COLL_BROADCAST, DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_LL, 0, 0},
      {DYNAMICCL_NCCL_COLL_ALLGATHER, DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_SIMPLE, 0, 0},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_SIMPLE, 0, 1},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_NVLS_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE, 0,
       1},
      {DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_COLLNET_CHAIN,
       DYNAMICCL_NCCL_PROTO_SIMPLE, 1, 0},
  };
  for (const PairCase& k : accepted) {
    plugin().publish(k.coll, kBytes, k.algo, k.proto, -1);
    const V2Call c = call(k.coll, kBytes, k.collnet, k.nvls);
    EXPECT_EQ(c.algorithm, k.algo);
    EXPECT_EQ(c.protocol, k.proto);
    EXPECT_EQ(c.n_channels, 0);
    EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  }
}

TEST_F(PluginTunerV2Test, NvlsTreeNeedsSeveralNodes) {
  void* single_node = init(/*n_nodes=*/1);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_NVLS_TREE,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  expect_untouched(call(single_node, DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, 0, 1));
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
  EXPECT_EQ(plugin().v2()->destroy(single_node), ncclSuccess);
}

TEST_F(PluginTunerV2Test, UserAlgoOrProtoEnvironmentDisablesForcingButNotChannels) {
  ASSERT_EQ(setenv("NCCL_PROTO", "^LL128", 1), 0);
  void* restricted = init(2);
  unsetenv("NCCL_PROTO");
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 4);
  expect_untouched(call(restricted));
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, -1, -1, 4);
  EXPECT_EQ(call(restricted).n_channels, 4);
  EXPECT_EQ(plugin().v2()->destroy(restricted), ncclSuccess);
}

TEST_F(PluginTunerV2Test, MismatchedBytesKeepNcclDefaults) {
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 4);
  expect_untouched(call(DYNAMICCL_NCCL_COLL_ALLREDUCE, 2 * kBytes));
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_MISMATCHED);
}

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
