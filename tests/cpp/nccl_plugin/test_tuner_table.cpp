// Tuner ABIs v3..v6: decisions reach NCCL through the cost table, never through a slot
// NCCL marked unavailable, and only for the call they were published for.
#include <cstring>
#include <random>
#include <thread>

#include "table_abi.h"

namespace dynamiccl {
namespace testing {
namespace {

constexpr size_t kMiB = 1 << 20;

class PluginTunerTableTest : public PluginTest, public ::testing::WithParamInterface<TableAbi> {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    ctx_ = abi().init();
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override { EXPECT_EQ(abi().fini(ctx_), ncclSuccess); }

  const TableAbi& abi() const { return GetParam(); }
  CostTable table() const { return CostTable(abi().num_algo); }
  // One getCollInfo for a lone collective; returns the channel output (NCCL passes 0).
  int call(CostTable& t, int coll = DYNAMICCL_NCCL_COLL_ALLREDUCE, size_t bytes = kMiB,
           int pipe_ops = 1) {
    int n_channels = 0;
    EXPECT_EQ(abi().get(ctx_, coll, bytes, pipe_ops, t, &n_channels), ncclSuccess);
    EXPECT_TRUE(t.guards_intact());
    return n_channels;
  }

  void* ctx_ = nullptr;
};

TEST_P(PluginTunerTableTest, EveryAvailablePairCanBeForced) {
  for (int a = 0; a < abi().num_algo; ++a) {
    for (int p = 0; p < CostTable::kProto; ++p) {
      CostTable t = table();
      plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, a, p, -1);
      EXPECT_EQ(call(t), 0);
      EXPECT_EQ(t.at(a, p), 0.0f);
      EXPECT_EQ(t.nccl_choice(), std::make_pair(a, p));
      EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
    }
  }
}

TEST_P(PluginTunerTableTest, OnlyTheChosenEntryChanges) {
  CostTable t = table();
  const CostTable before = t;
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_LL128, 12);
  EXPECT_EQ(call(t), 12);
  for (int i = 0; i < abi().num_algo * CostTable::kProto; ++i) {
    if (i == DYNAMICCL_NCCL_ALGO_TREE * CostTable::kProto + DYNAMICCL_NCCL_PROTO_LL128) continue;
    EXPECT_EQ(t.cells[i], before.cells[i]) << "cell " << i;
  }
}

TEST_P(PluginTunerTableTest, UnavailablePairIsNeverChosen) {
  CostTable t = table();
  t.mark_unavailable(DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_SIMPLE);
  const CostTable before = t;
  const auto counters = plugin().counters();
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_NVLS,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 4);
  EXPECT_EQ(call(t), 0) << "an unhonoured decision must not cap channels either";
  EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  EXPECT_EQ(t.at(DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_SIMPLE), -1.0f);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
  EXPECT_EQ(plugin().counters().unavailable, counters.unavailable + 1);
  EXPECT_EQ(plugin().counters().applied, counters.applied);
}

TEST_P(PluginTunerTableTest, AlgorithmBeyondTheTableIsUnavailable) {
  CostTable t = table();
  const CostTable before = t;
  // PAT is id 6: outside a 6-algorithm table (NCCL 2.22), inside a 7-algorithm one.
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLGATHER, kMiB, DYNAMICCL_NCCL_ALGO_PAT,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  call(t, DYNAMICCL_NCCL_COLL_ALLGATHER);
  if (abi().num_algo == 6) {
    EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
    EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  } else {
    EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
    EXPECT_EQ(t.nccl_choice(),
              std::make_pair(DYNAMICCL_NCCL_ALGO_PAT, DYNAMICCL_NCCL_PROTO_SIMPLE));
  }
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, 99, DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  call(t);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
}

TEST_P(PluginTunerTableTest, AlgorithmOnlyTakesNcclsCheapestProtocolOfThatAlgorithm) {
  CostTable t = table();
  t.at(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_LL) = -1.0f;
  t.at(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_LL128) = 90.0f;
  t.at(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE) = 80.0f;
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_TREE, -1, -1);
  call(t);
  EXPECT_EQ(t.nccl_choice(), std::make_pair(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE));
  EXPECT_EQ(t.at(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_LL), -1.0f);
}

TEST_P(PluginTunerTableTest, ProtocolOnlyTakesNcclsCheapestAlgorithmForThatProtocol) {
  CostTable t = table();
  for (int a = 0; a < abi().num_algo; ++a) t.mark_unavailable(a, DYNAMICCL_NCCL_PROTO_LL);
  t.at(DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_LL) = 500.0f;  // costly but the only one
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, -1, DYNAMICCL_NCCL_PROTO_LL, -1);
  call(t);
  EXPECT_EQ(t.nccl_choice(), std::make_pair(DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_LL));
}

TEST_P(PluginTunerTableTest, ProtocolWithNoAvailableAlgorithmIsUnavailable) {
  CostTable t = table();
  for (int a = 0; a < abi().num_algo; ++a) t.mark_unavailable(a, DYNAMICCL_NCCL_PROTO_LL128);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, -1, DYNAMICCL_NCCL_PROTO_LL128, 2);
  EXPECT_EQ(call(t), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
}

TEST_P(PluginTunerTableTest, ForcedEntryWinsOverOtherZeroCostEntries) {
  CostTable t = table();
  t.at(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_LL) = 0.0f;  // lower index, also free
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  call(t);
  EXPECT_EQ(t.nccl_choice(), std::make_pair(DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_SIMPLE));
  EXPECT_GT(t.at(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_LL), 0.0f);
}

TEST_P(PluginTunerTableTest, ChannelsOnlyLeavesTheTableAlone) {
  CostTable t = table();
  const CostTable before = t;
  plugin().publish(DYNAMICCL_NCCL_COLL_REDUCESCATTER, 8 * kMiB, -1, -1, 4);
  EXPECT_EQ(call(t, DYNAMICCL_NCCL_COLL_REDUCESCATTER, 8 * kMiB), 4);
  EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
}

TEST_P(PluginTunerTableTest, ChannelCapIsClampedToNcclsMaximum) {
  CostTable t = table();
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, -1, -1, 1000);
  EXPECT_EQ(call(t), DYNAMICCL_NCCL_MAX_CHANNELS);
}

TEST_P(PluginTunerTableTest, DefaultDecisionChangesNothing) {
  CostTable t = table();
  const CostTable before = t;
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, -1, -1, -1);
  EXPECT_EQ(call(t), 0);
  EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
}

TEST_P(PluginTunerTableTest, NothingPublishedAbstains) {
  CostTable t = table();
  const CostTable before = t;
  const auto counters = plugin().counters();
  EXPECT_EQ(call(t), 0);
  EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_ABSTAINED);
  EXPECT_EQ(plugin().counters().abstained, counters.abstained + 1);
}

TEST_P(PluginTunerTableTest, DecisionIsConsumedByTheCallItMatches) {
  CostTable first = table();
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_LL, 2);
  EXPECT_EQ(call(first), 2);
  CostTable second = table();
  const CostTable before = second;
  EXPECT_EQ(call(second), 0);
  EXPECT_EQ(std::memcmp(second.cells, before.cells, sizeof(second.cells)), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_ABSTAINED);
}

TEST_P(PluginTunerTableTest, OtherBytesOrTypeMismatchAndKeepTheDecision) {
  const auto counters = plugin().counters();
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_LL, 2);
  for (auto [coll, bytes] : {std::make_pair(DYNAMICCL_NCCL_COLL_ALLREDUCE, 2 * kMiB),
                             std::make_pair(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB - 1),
                             std::make_pair(DYNAMICCL_NCCL_COLL_ALLGATHER, kMiB)}) {
    CostTable t = table();
    const CostTable before = t;
    EXPECT_EQ(call(t, coll, bytes), 0);
    EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
    EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_MISMATCHED);
  }
  EXPECT_EQ(plugin().counters().mismatched, counters.mismatched + 3);
  CostTable t = table();
  EXPECT_EQ(call(t), 2) << "the published call still gets its decision";
  EXPECT_EQ(t.nccl_choice(), std::make_pair(DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_LL));
}

TEST_P(PluginTunerTableTest, MergedGroupCallMismatchesEvenWithEqualBytes) {
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_LL, 2);
  CostTable t = table();
  const CostTable before = t;
  EXPECT_EQ(call(t, DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, /*pipe_ops=*/2), 0);
  EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_MISMATCHED);
}

// A non-blocking communicator: NCCL calls getCollInfo on a thread of its own while the issuing
// thread waits. The decision published on the issuing thread applies there, and the outcome is
// the issuing thread's to read afterwards.
TEST_P(PluginTunerTableTest, CallOnNcclsOwnThreadAppliesTheChannelsDecision) {
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 3);
  int channels = 0;
  CostTable t = table();
  std::thread([&] {
    abi().get(ctx_, DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, 1, t, &channels);
  }).join();
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  EXPECT_EQ(channels, 3);
  EXPECT_EQ(t.nccl_choice(), std::make_pair(DYNAMICCL_NCCL_ALGO_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE));
}

TEST_P(PluginTunerTableTest, ClearedDecisionIsNotApplied) {
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 3);
  plugin().clear();
  CostTable t = table();
  EXPECT_EQ(call(t), 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_ABSTAINED);
}

TEST_P(PluginTunerTableTest, NullContextAbstains) {
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 3);
  CostTable t = table();
  const CostTable before = t;
  int n_channels = 0;
  EXPECT_EQ(abi().get(nullptr, DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, 1, t, &n_channels),
            ncclSuccess);
  EXPECT_EQ(n_channels, 0);
  EXPECT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
  // No channel reached: the group reads that its decision went unseen.
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_NOT_CALLED);
}

// Random tables and decisions: success is always returned, -1 entries stay -1, and the
// choice NCCL then makes honours the decision exactly when the outcome says APPLIED.
TEST_P(PluginTunerTableTest, RandomDecisionsNeverBreakTheTableContract) {
  std::mt19937 rng(20240611u + static_cast<unsigned>(abi().version * 10 + abi().num_algo));
  std::uniform_int_distribution<int> algo_of(-1, DYNAMICCL_NCCL_NUM_ALGOS);
  std::uniform_int_distribution<int> proto_of(-1, DYNAMICCL_NCCL_NUM_PROTOS);
  std::uniform_int_distribution<int> chan_of(-1, 80);
  std::uniform_real_distribution<float> cost_of(0.0f, 100.0f);
  std::bernoulli_distribution unavailable(0.4);
  for (int iter = 0; iter < 2000; ++iter) {
    CostTable t = table();
    for (int i = 0; i < abi().num_algo * CostTable::kProto; ++i) {
      t.cells[i] = unavailable(rng) ? -1.0f : cost_of(rng);
    }
    const CostTable before = t;
    const int algo = algo_of(rng), proto = proto_of(rng), chans = chan_of(rng);
    plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, algo, proto, chans);
    const int got_channels = call(t);
    const int outcome = plugin().last_outcome();
    ASSERT_TRUE(outcome == DYNAMICCL_NCCL_APPLIED || outcome == DYNAMICCL_NCCL_UNAVAILABLE);
    for (int i = 0; i < abi().num_algo * CostTable::kProto; ++i) {
      if (before.cells[i] < 0.0f) ASSERT_EQ(t.cells[i], -1.0f) << "iteration " << iter;
    }
    if (outcome == DYNAMICCL_NCCL_UNAVAILABLE) {
      ASSERT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
      ASSERT_EQ(got_channels, 0);
      continue;
    }
    const auto choice = t.nccl_choice();
    if (algo >= 0) ASSERT_EQ(choice.first, algo);
    if (proto >= 0) ASSERT_EQ(choice.second, proto);
    if (algo < 0 && proto < 0) ASSERT_EQ(std::memcmp(t.cells, before.cells, sizeof(t.cells)), 0);
    ASSERT_EQ(got_channels, chans > 0 ? (chans > 64 ? 64 : chans) : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTableAbis, PluginTunerTableTest, ::testing::ValuesIn(kTableAbis),
                         [](const ::testing::TestParamInfo<TableAbi>& info) {
                           return "v" + std::to_string(info.param.version) + "_" +
                                  std::to_string(info.param.num_algo) + "algos";
                         });

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
