// Communicator life cycle, counters and the outcome API, across all tuner ABIs.
#include <cstring>
#include <thread>
#include <vector>

#include "table_abi.h"

namespace dynamiccl {
namespace testing {
namespace {

constexpr size_t kBytes = 256 << 10;

using PluginTunerLifecycleTest = PluginTest;

TEST_F(PluginTunerLifecycleTest, EveryAbiIsExportedUnderItsNcclName) {
  ASSERT_NE(plugin().v2(), nullptr);
  ASSERT_NE(plugin().v3(), nullptr);
  ASSERT_NE(plugin().v4(), nullptr);
  ASSERT_NE(plugin().v5(), nullptr);
  ASSERT_NE(plugin().v6(), nullptr);
  ASSERT_NE(plugin().v7(), nullptr);
  EXPECT_STREQ(plugin().v5()->name, "DynamICCL");
  EXPECT_STREQ(plugin().v6()->name, "DynamICCL");
  EXPECT_STREQ(plugin().v7()->name, "DynamICCL");
  EXPECT_NE(plugin().v7()->getChunkSize, nullptr);
  EXPECT_NE(plugin().v6()->getCollInfo, nullptr);
  EXPECT_NE(plugin().v6()->finalize, nullptr);
  EXPECT_NE(plugin().v6()->getChunkSize, nullptr);
  // v1 (NCCL 2.19-2.20) has no per-communicator context; it is deliberately not offered.
  EXPECT_EQ(dlsym(plugin().handle(), "ncclTunerPlugin_v1"), nullptr);
}

TEST_F(PluginTunerLifecycleTest, InitAndFinalizeTrackActiveCommunicators) {
  const auto before = plugin().counters();
  std::vector<std::pair<TableAbi, void*>> comms;
  for (const TableAbi& abi : kTableAbis) comms.emplace_back(abi, abi.init(4, 1, 0xabc));
  void* v2_ctx = nullptr;
  ASSERT_EQ(plugin().v2()->init(4, 1, nullptr, &v2_ctx), ncclSuccess);
  ASSERT_NE(v2_ctx, nullptr);

  const auto during = plugin().counters();
  EXPECT_EQ(during.init_calls, before.init_calls + comms.size() + 1);
  EXPECT_EQ(during.active_comms, before.active_comms + comms.size() + 1);
  EXPECT_EQ(plugin().loaded_by_nccl(), 1);

  for (auto& [abi, ctx] : comms) {
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(abi.fini(ctx), ncclSuccess);
  }
  EXPECT_EQ(plugin().v2()->destroy(v2_ctx), ncclSuccess);
  const auto after = plugin().counters();
  EXPECT_EQ(after.active_comms, before.active_comms);
  EXPECT_EQ(after.init_calls, during.init_calls);
}

// NCCL 2.30 asks for the chunk size after settling algorithm, protocol and channels; with no
// decision published the plugin keeps NCCL's value and counts the call (test_tuner_chunk.cpp has
// the chunk arms).
TEST_F(PluginTunerLifecycleTest, V6KeepsNcclsChunkSizeAndCountsTheCall) {
  void* ctx = nullptr;
  ASSERT_EQ(plugin().v6()->init(&ctx, 0xabc, 4, 1, nullptr, nullptr, nullptr), ncclSuccess);
  EXPECT_EQ(plugin().counters().abi_version, 6u);
  const auto before = plugin().counters().chunk_size_calls;
  size_t chunk = 131072;
  EXPECT_EQ(plugin().v6()->getChunkSize(ctx, ncclFuncAllReduce, kBytes, 1, 2, 8, &chunk),
            ncclSuccess);
  EXPECT_EQ(chunk, 131072u);
  EXPECT_EQ(plugin().counters().chunk_size_calls, before + 1);
  EXPECT_EQ(plugin().v6()->finalize(ctx), ncclSuccess);
}

TEST_F(PluginTunerLifecycleTest, NullArgumentsNeverFailNccl) {
  EXPECT_EQ(plugin().v5()->finalize(nullptr), ncclSuccess);
  EXPECT_EQ(plugin().v4()->destroy(nullptr), ncclSuccess);
  EXPECT_EQ(plugin().v5()->init(nullptr, 1, 2, 1, nullptr, nullptr, nullptr), ncclSuccess);
  // A channel cap cannot be written without NCCL's output: the decision is not honoured.
  void* ctx = kTableAbis[3].init();
  CostTable t(7);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, -1, -1, 8);
  EXPECT_EQ(plugin().v5()->getCollInfo(ctx, ncclFuncAllReduce, kBytes, 1, t.arg(), 7, 3, 0,
                                       nullptr),
            ncclSuccess);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
  // A missing table cannot take a forced pair either.
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_LL, -1);
  int n_channels = 0;
  EXPECT_EQ(plugin().v5()->getCollInfo(ctx, ncclFuncAllReduce, kBytes, 1, nullptr, 7, 3, 0,
                                       &n_channels),
            ncclSuccess);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
  EXPECT_EQ(kTableAbis[3].fini(ctx), ncclSuccess);
}

TEST_F(PluginTunerLifecycleTest, OutcomeIsPerChannelAndResetByPublish) {
  void* ctx = kTableAbis[4].init();
  CostTable t(7);
  int n_channels = 0;
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, -1, -1, 2);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_NOT_CALLED);
  kTableAbis[4].get(ctx, DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, 1, t, &n_channels);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  plugin().clear();
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED) << "clear keeps the outcome";
  const int other = plugin().channel_open();
  EXPECT_EQ(plugin().last_outcome_fn(other), DYNAMICCL_NCCL_NOT_CALLED);
  plugin().channel_close(other);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, -1, -1, 2);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_NOT_CALLED);
  EXPECT_EQ(kTableAbis[4].fini(ctx), ncclSuccess);
}

// Several groups, each on its own thread with its own channel and communicator, at once: each
// group's decisions reach only its own calls, and the relaxed counters lose nothing.
TEST_F(PluginTunerLifecycleTest, ConcurrentGroupsKeepDecisionsApartAndCountersExact) {
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 2000;
  const auto before = plugin().counters();
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const int channel = plugin().channel_open();
      plugin().expect_comm(channel, 8);
      void* ctx = kTableAbis[3].init();  // binds to this thread's expectation
      plugin().expect_comm(channel, static_cast<size_t>(-1));
      for (int k = 0; k < kCallsPerThread; ++k) {
        // Group i forces algorithm i % 2 with protocol k % 3 and i + 1 channels.
        const int algo = i % 2, proto = k % 3;
        const size_t bytes = kBytes + static_cast<size_t>(i);
        plugin().publish_fn(channel, DYNAMICCL_NCCL_COLL_ALLREDUCE, bytes, algo, proto, i + 1);
        CostTable t(7);
        int n_channels = 0;
        kTableAbis[3].get(ctx, DYNAMICCL_NCCL_COLL_ALLREDUCE, bytes, 1, t, &n_channels);
        if (t.nccl_choice() != std::make_pair(algo, proto) || n_channels != i + 1) ++wrong[i];
        CostTable mismatched(7);
        kTableAbis[3].get(ctx, DYNAMICCL_NCCL_COLL_BROADCAST, bytes, 1, mismatched, &n_channels);
      }
      kTableAbis[3].fini(ctx);
      plugin().channel_close(channel);
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(wrong[i], 0) << "group " << i;
  const auto after = plugin().counters();
  const uint64_t total = static_cast<uint64_t>(kThreads) * kCallsPerThread;
  EXPECT_EQ(after.applied - before.applied, total);
  // The Broadcast after each consumed decision finds nothing published on its channel.
  EXPECT_EQ(after.abstained - before.abstained, total);
  EXPECT_EQ(after.mismatched - before.mismatched, 0u);
}

// A communicator created while no group expects one (another library's) binds to no channel:
// it abstains whatever is published, and is counted.
TEST_F(PluginTunerLifecycleTest, CommunicatorCreatedOutsideAnExpectationIsNeverTuned) {
  plugin().expect_comm(plugin().channel(), static_cast<size_t>(-1));
  const auto before = plugin().counters();
  void* ctx = kTableAbis[4].init();
  EXPECT_EQ(plugin().counters().unbound_comms, before.unbound_comms + 1);
  EXPECT_EQ(plugin().comms_bound(plugin().channel()), 0);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 2);
  CostTable t(7);
  const CostTable untouched = t;
  int n_channels = 0;
  kTableAbis[4].get(ctx, DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, 1, t, &n_channels);
  EXPECT_EQ(std::memcmp(t.cells, untouched.cells, sizeof(t.cells)), 0);
  EXPECT_EQ(n_channels, 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_NOT_CALLED);
  EXPECT_EQ(kTableAbis[4].fini(ctx), ncclSuccess);
}

// Where several groups expect a communicator of the size being created, on threads other than
// the one NCCL initialises it on, which group it is for cannot be told: it binds to none (and
// each group's check finds its channel unconsulted and steps aside).
TEST_F(PluginTunerLifecycleTest, AmbiguousExpectationsBindNothing) {
  plugin().expect_comm(plugin().channel(), static_cast<size_t>(-1));
  const int a = plugin().channel_open(), b = plugin().channel_open();
  plugin().expect_comm(a, 4);
  plugin().expect_comm(b, 4);
  void* ctx = nullptr;
  std::thread([&] { ctx = kTableAbis[4].init(4); }).join();  // NCCL's own thread
  EXPECT_EQ(plugin().comms_bound(a) + plugin().comms_bound(b), 0);
  EXPECT_EQ(kTableAbis[4].fini(ctx), ncclSuccess);
  // One expectation left: a communicator initialised on NCCL's own thread binds to it.
  plugin().expect_comm(b, static_cast<size_t>(-1));
  std::thread([&] { ctx = kTableAbis[4].init(4); }).join();
  EXPECT_EQ(plugin().comms_bound(a), 1);
  // Another size does not.
  void* other = nullptr;
  std::thread([&] { other = kTableAbis[4].init(8); }).join();
  EXPECT_EQ(plugin().comms_bound(a), 1);
  EXPECT_EQ(kTableAbis[4].fini(other), ncclSuccess);
  plugin().publish_fn(a, DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_TREE,
                      DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  CostTable t(7);
  int n_channels = 0;
  kTableAbis[4].get(ctx, DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, 1, t, &n_channels);
  EXPECT_EQ(plugin().last_outcome_fn(a), DYNAMICCL_NCCL_APPLIED);
  EXPECT_EQ(kTableAbis[4].fini(ctx), ncclSuccess);
  plugin().channel_close(a);
  plugin().channel_close(b);
}

// A group's channel closes with the group; its communicator, if NCCL keeps it, abstains from
// then on, even once the channel's slot serves a new group.
TEST_F(PluginTunerLifecycleTest, ClosedChannelIsNeverReadAgain) {
  void* ctx = kTableAbis[4].init();
  const int old_channel = plugin().channel();
  plugin().open_test_channel();  // closes the old one; may reuse its slot
  EXPECT_NE(plugin().channel(), old_channel);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 2);
  CostTable t(7);
  int n_channels = 0;
  kTableAbis[4].get(ctx, DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, 1, t, &n_channels);
  EXPECT_EQ(n_channels, 0);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_NOT_CALLED);
  EXPECT_EQ(plugin().last_outcome_fn(old_channel), DYNAMICCL_NCCL_NOT_CALLED);
  EXPECT_EQ(kTableAbis[4].fini(ctx), ncclSuccess);
}

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
