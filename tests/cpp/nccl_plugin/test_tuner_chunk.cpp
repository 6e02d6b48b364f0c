// Chunk size (tuner ABI v6, NCCL >= 2.30): getChunkSize returns the published chunk for the
// collective whose decision getCollInfo applied on its channel, and keeps NCCL's value otherwise.
#include "table_abi.h"

namespace dynamiccl {
namespace testing {
namespace {

constexpr size_t kBytes = 64 << 20;
constexpr size_t kNcclChunk = DYNAMICCL_NCCL_CHUNK_STEP_SIMPLE;
constexpr size_t kHalfSimple = DYNAMICCL_NCCL_CHUNK_STEP_SIMPLE / 2;

class PluginTunerChunkTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    ASSERT_NE(plugin().publish_chunk_fn, nullptr);
    ASSERT_EQ(plugin().v6()->init(&ctx_, 0x30, 8, 1, nullptr, nullptr, nullptr), ncclSuccess);
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override {
    plugin().clear();
    EXPECT_EQ(plugin().v6()->finalize(ctx_), ncclSuccess);
  }

  // NCCL's sequence for one lone collective: getCollInfo, its pick, then getChunkSize for that
  // pick. Returns the chunk NCCL ends up with (it passes kNcclChunk in).
  size_t run(int coll, size_t bytes, CostTable& table, size_t nccl_chunk = kNcclChunk) {
    int n_channels = 0;
    EXPECT_EQ(plugin().v6()->getCollInfo(ctx_, static_cast<ncclFunc_t>(coll), bytes, 1, table.arg(),
                                         DYNAMICCL_NCCL_NUM_ALGOS, DYNAMICCL_NCCL_NUM_PROTOS, 0,
                                         &n_channels),
              ncclSuccess);
    const auto [algo, proto] = table.nccl_choice();
    size_t chunk = nccl_chunk;
    EXPECT_EQ(plugin().v6()->getChunkSize(ctx_, static_cast<ncclFunc_t>(coll), bytes, algo, proto,
                                          n_channels > 0 ? n_channels : 16, &chunk),
              ncclSuccess);
    return chunk;
  }

  void* ctx_ = nullptr;
};

TEST_F(PluginTunerChunkTest, AppliesAMatchingPublishedChunk) {
  const auto before = plugin().counters();
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  plugin().publish_chunk(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                         DYNAMICCL_NCCL_PROTO_SIMPLE, -1, kHalfSimple);
  EXPECT_EQ(run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table), kHalfSimple);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  const auto after = plugin().counters();
  EXPECT_EQ(after.chunk_size_calls, before.chunk_size_calls + 1);
  EXPECT_EQ(after.chunk_size_applied, before.chunk_size_applied + 1);
  EXPECT_EQ(after.chunk_size_rejected, before.chunk_size_rejected);
}

// NCCL may ask once per channel range of the collective: every piece gets the chunk, counted once.
TEST_F(PluginTunerChunkTest, RepeatedAsksForOneCollectiveGetTheSameChunkCountedOnce) {
  const auto before = plugin().counters();
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  plugin().publish_chunk(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                         DYNAMICCL_NCCL_PROTO_SIMPLE, 4, kHalfSimple);
  EXPECT_EQ(run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table), kHalfSimple);
  size_t chunk = kNcclChunk;
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllReduce, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 4, &chunk);
  EXPECT_EQ(chunk, kHalfSimple);
  EXPECT_EQ(plugin().counters().chunk_size_applied, before.chunk_size_applied + 1);
}

TEST_F(PluginTunerChunkTest, AbstainsOnAnotherCollectiveOrSize) {
  const auto before = plugin().counters();
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  plugin().publish_chunk(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                         DYNAMICCL_NCCL_PROTO_SIMPLE, -1, kHalfSimple);
  EXPECT_EQ(run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes + 4, table), kNcclChunk);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_MISMATCHED);
  // getChunkSize alone for a call getCollInfo never applied the decision to.
  size_t chunk = kNcclChunk;
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllGather, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 8, &chunk);
  EXPECT_EQ(chunk, kNcclChunk);
  EXPECT_EQ(plugin().counters().chunk_size_applied, before.chunk_size_applied);
}

// getCollInfo applied the decision, but getChunkSize is about another type or size (a later
// piece of a group, say): NCCL's value stays.
TEST_F(PluginTunerChunkTest, AbstainsWhenTheChunkCallIsNotTheDecisions) {
  const auto before = plugin().counters();
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  plugin().publish_chunk(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                         DYNAMICCL_NCCL_PROTO_SIMPLE, -1, kHalfSimple);
  int n_channels = 0;
  plugin().v6()->getCollInfo(ctx_, ncclFuncAllReduce, kBytes, 1, table.arg(),
                             DYNAMICCL_NCCL_NUM_ALGOS, DYNAMICCL_NCCL_NUM_PROTOS, 0, &n_channels);
  ASSERT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  size_t chunk = kNcclChunk;
  plugin().v6()->getChunkSize(ctx_, ncclFuncReduceScatter, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 8, &chunk);
  EXPECT_EQ(chunk, kNcclChunk);
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllReduce, kBytes / 2, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 8, &chunk);
  EXPECT_EQ(chunk, kNcclChunk);
  // NCCL settled on another pair than the decision named.
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllReduce, kBytes, DYNAMICCL_NCCL_ALGO_TREE,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 8, &chunk);
  EXPECT_EQ(chunk, kNcclChunk);
  // After the backend clears the slot, nothing is returned any more.
  plugin().clear();
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllReduce, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 8, &chunk);
  EXPECT_EQ(chunk, kNcclChunk);
  EXPECT_EQ(plugin().counters().chunk_size_applied, before.chunk_size_applied);
}

// A decision NCCL could not apply (pair unavailable) carries no chunk either.
TEST_F(PluginTunerChunkTest, AbstainsWhenTheDecisionWasUnavailable) {
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  table.mark_unavailable(DYNAMICCL_NCCL_ALGO_RING, DYNAMICCL_NCCL_PROTO_SIMPLE);
  plugin().publish_chunk(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                         DYNAMICCL_NCCL_PROTO_SIMPLE, -1, kHalfSimple);
  EXPECT_EQ(run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table), kNcclChunk);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
}

// A chunk NCCL would have to clamp or round (not the protocol's step buffer / 2^k, or beyond it)
// is never returned: NCCL's value stays and the rejection is counted.
TEST_F(PluginTunerChunkTest, NeverReturnsAnInvalidChunk) {
  for (const size_t bad :
       {kHalfSimple + 1, size_t{3} << 20, size_t{1000}, DYNAMICCL_NCCL_CHUNK_STEP_SIMPLE / 128,
        DYNAMICCL_NCCL_CHUNK_STEP_LL128 / 2}) {
    const auto before = plugin().counters();
    CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
    plugin().publish_chunk(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                           DYNAMICCL_NCCL_PROTO_SIMPLE, -1, bad);
    EXPECT_EQ(run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table), kNcclChunk) << bad;
    EXPECT_EQ(plugin().counters().chunk_size_rejected, before.chunk_size_rejected + 1) << bad;
    EXPECT_EQ(plugin().counters().chunk_size_applied, before.chunk_size_applied) << bad;
  }
}

TEST_F(PluginTunerChunkTest, ValidChunksAreTheStepBufferOverPowersOfTwo) {
  EXPECT_TRUE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_SIMPLE, 512 << 10));
  EXPECT_TRUE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_SIMPLE, 128 << 10));
  EXPECT_TRUE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_LL128, 150 << 10));
  EXPECT_TRUE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_LL, 16 << 10));
  EXPECT_FALSE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_SIMPLE, 0));
  EXPECT_FALSE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_SIMPLE, 1 << 20));
  EXPECT_FALSE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_PROTO_LL128, 128 << 10));
  EXPECT_FALSE(dynamiccl_nccl_chunk_valid(-1, 128 << 10));
  EXPECT_FALSE(dynamiccl_nccl_chunk_valid(DYNAMICCL_NCCL_NUM_PROTOS, 128 << 10));
}

// The channels NCCL settled on reach the backend for every collective, tuned or not (NCCL's own
// pick: the communicator's real channel count, which the tuner is otherwise never told): the most
// of its pieces, for that collective only, and nothing after a clear or for another call.
TEST_F(PluginTunerChunkTest, ReportsTheChannelsNcclSettledOnForTheLastCollective) {
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  plugin().clear();  // the default arm: nothing published
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes), 0);
  run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table);  // NCCL's pick, 16 channels
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes), 16);
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes + 4), 0);
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLGATHER, kBytes), 0);
  size_t chunk = kNcclChunk;  // a second piece of the same collective, on more channels
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllReduce, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 24, &chunk);
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes), 24);
  plugin().clear();
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes), 0);

  // A capped decision: what NCCL ran it with, and a later collective replaces the report.
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 4);
  run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table);
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes), 4);
  plugin().v6()->getChunkSize(ctx_, ncclFuncAllGather, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                              DYNAMICCL_NCCL_PROTO_SIMPLE, 2, &chunk);
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes), 0);
  EXPECT_EQ(plugin().last_channels(DYNAMICCL_NCCL_COLL_ALLGATHER, kBytes), 2);
}

// The plain publish carries no chunk: NCCL's value stays, as before chunk arms existed.
TEST_F(PluginTunerChunkTest, PublishWithoutChunkKeepsNcclsChunk) {
  const auto before = plugin().counters();
  CostTable table(DYNAMICCL_NCCL_NUM_ALGOS);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  EXPECT_EQ(run(DYNAMICCL_NCCL_COLL_ALLREDUCE, kBytes, table), kNcclChunk);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  EXPECT_EQ(plugin().counters().chunk_size_applied, before.chunk_size_applied);
}

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
