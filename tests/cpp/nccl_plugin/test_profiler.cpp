// Profiler ABI v5 (NCCL 2.28+): events are driven in the order NCCL sends them — Coll
// start/stop at launch, then per channel KernelCh start, KernelChStop state, stop — and the
// ring read back through the C API.
#include <set>
#include <thread>
#include <vector>

#include "plugin_under_test.h"

namespace dynamiccl {
namespace testing {
namespace {

class PluginProfilerTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    prof_ = plugin().profiler();
    ASSERT_NE(prof_, nullptr);
    ASSERT_EQ(prof_->init(&ctx_, kCommId, &mask_, "tp", 1, 4, 2, nullptr), ncclSuccess);
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override { EXPECT_EQ(prof_->finalize(ctx_), ncclSuccess); }

  // What NCCL 2.28 reports for one launched collective; returns the event handle.
  void* start_coll(const char* func, const char* algo, const char* proto, int channels,
                   uint64_t seq = 7, size_t count = 1024) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileColl;
    d.rank = 2;
    d.coll.seqNumber = seq;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = static_cast<uint8_t>(channels);
    d.coll.nWarps = 16;
    d.coll.algo = algo;
    d.coll.proto = proto;
    void* h = nullptr;
    EXPECT_EQ(prof_->startEvent(ctx_, &h, &d), ncclSuccess);
    EXPECT_NE(h, nullptr);
    EXPECT_EQ(prof_->stopEvent(h), ncclSuccess);  // NCCL stops it at enqueue
    return h;
  }

  void* start_channel(void* coll, int channel, uint64_t start_ns) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<uint8_t>(channel);
    d.kernelCh.pTimer = start_ns;
    void* h = nullptr;
    EXPECT_EQ(prof_->startEvent(ctx_, &h, &d), ncclSuccess);
    return h;
  }

  void stop_channel(void* h, uint64_t stop_ns) {
    ncclProfilerEventStateArgs_v5_t a{};
    a.kernelCh.pTimer = stop_ns;
    EXPECT_EQ(prof_->recordEventState(h, ncclProfilerKernelChStop, &a), ncclSuccess);
    EXPECT_EQ(prof_->stopEvent(h), ncclSuccess);
  }

  std::vector<dynamiccl_nccl_coll_record> read_after(uint64_t after_id, size_t max = 4096) {
    std::vector<dynamiccl_nccl_coll_record> out(max);
    out.resize(plugin().profiler_read(after_id, out.data(), out.size()));
    return out;
  }

  // Id of the newest record so far, 0 when the ring is still empty.
  uint64_t last_id() {
    const auto all = read_after(0);
    return all.empty() ? 0 : all.back().id;
  }

  // The newest record, read back through the API.
  dynamiccl_nccl_coll_record newest() {
    const auto all = read_after(0);
    EXPECT_FALSE(all.empty());
    return all.empty() ? dynamiccl_nccl_coll_record{} : all.back();
  }

  static constexpr uint64_t kCommId = 0xfeedbeef12345678ull;
  const ncclProfiler_v5_t* prof_ = nullptr;
  void* ctx_ = nullptr;
  int mask_ = 0;
};

TEST_F(PluginProfilerTest, InitAsksForCollectiveAndKernelChannelEventsOnly) {
  EXPECT_EQ(mask_, static_cast<int>(ncclProfileColl | ncclProfileKernelCh));
  EXPECT_EQ(plugin().profiler_loaded_by_nccl(), 1);
  EXPECT_STREQ(prof_->name, "DynamICCL");
}

TEST_F(PluginProfilerTest, CollectiveRecordsWhatNcclRan) {
  start_coll("AllReduce", "RING", "LL128", 12, /*seq=*/41, /*count=*/1 << 20);
  const auto r = newest();
  EXPECT_EQ(r.comm_id, kCommId);
  EXPECT_EQ(r.seq_number, 41u);
  EXPECT_EQ(r.count, 1u << 20);
  EXPECT_EQ(r.coll_type, DYNAMICCL_NCCL_COLL_ALLREDUCE);
  EXPECT_EQ(r.algo, DYNAMICCL_NCCL_ALGO_RING);
  EXPECT_EQ(r.proto, DYNAMICCL_NCCL_PROTO_LL128);
  EXPECT_EQ(r.nchannels, 12);
  EXPECT_EQ(r.nwarps, 16);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.kernel_start_ns, 0u);
  EXPECT_EQ(r.kernel_channels_done, 0);
}

TEST_F(PluginProfilerTest, NamesAreRecognisedInEverySpelling) {
  struct Case {
    const char* func;
    const char* algo;
    const char* proto;
    int coll, algo_id, proto_id;
  };
  const Case cases[] = {
      {"ReduceScatter", "NVLS_TREE", "SIMPLE", DYNAMICCL_NCCL_COLL_REDUCESCATTER,
       DYNAMICCL_NCCL_ALGO_NVLS_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE},
      {"AllGather", "NVLSTree", "Simple", DYNAMICCL_NCCL_COLL_ALLGATHER,
       DYNAMICCL_NCCL_ALGO_NVLS_TREE, DYNAMICCL_NCCL_PROTO_SIMPLE},
      {"Broadcast", "COLLNET_DIRECT", "LL", DYNAMICCL_NCCL_COLL_BROADCAST,
       DYNAMICCL_NCCL_ALGO_COLLNET_DIRECT, DYNAMICCL_NCCL_PROTO_LL},
      {"Reduce", "CollNetChain", "LL128", DYNAMICCL_NCCL_COLL_REDUCE,
       DYNAMICCL_NCCL_ALGO_COLLNET_CHAIN, DYNAMICCL_NCCL_PROTO_LL128},
      {"AllGather", "PAT", "SIMPLE", DYNAMICCL_NCCL_COLL_ALLGATHER, DYNAMICCL_NCCL_ALGO_PAT,
       DYNAMICCL_NCCL_PROTO_SIMPLE},
      {"AllReduce", "TREE", "LL", DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_TREE,
       DYNAMICCL_NCCL_PROTO_LL},
      {"AllReduce", "NVLS", "SIMPLE", DYNAMICCL_NCCL_COLL_ALLREDUCE, DYNAMICCL_NCCL_ALGO_NVLS,
       DYNAMICCL_NCCL_PROTO_SIMPLE},
      {"AlltoAll", "Unknown", "LL12", -1, -1, -1},
  };
  for (const Case& k : cases) {
    start_coll(k.func, k.algo, k.proto, 2);
    const auto r = newest();
    EXPECT_EQ(r.coll_type, k.coll) << k.func;
    EXPECT_EQ(r.algo, k.algo_id) << k.algo;
    EXPECT_EQ(r.proto, k.proto_id) << k.proto;
  }
}

TEST_F(PluginProfilerTest, KernelChannelsGiveTheCollectivesGpuSpan) {
  void* coll = start_coll("AllReduce", "RING", "SIMPLE", 3);
  const uint64_t id = newest().id;
  void* ch0 = start_channel(coll, 0, 1'000'500);
  void* ch1 = start_channel(coll, 1, 1'000'100);
  void* ch2 = start_channel(coll, 2, 1'000'300);
  ASSERT_NE(ch0, nullptr);
  ASSERT_NE(ch1, nullptr);
  ASSERT_NE(ch2, nullptr);
  stop_channel(ch1, 1'007'000);
  stop_channel(ch0, 1'009'000);
  auto r = read_after(id - 1, 1).at(0);
  EXPECT_EQ(r.id, id);
  EXPECT_EQ(r.kernel_start_ns, 1'000'100u);
  EXPECT_EQ(r.kernel_stop_ns, 1'009'000u);
  EXPECT_EQ(r.kernel_channels_done, 2) << "not final yet: one channel still running";
  stop_channel(ch2, 1'008'000);
  r = read_after(id - 1, 1).at(0);
  EXPECT_EQ(r.kernel_channels_done, 3);
  EXPECT_EQ(r.kernel_stop_ns, 1'009'000u);
}

TEST_F(PluginProfilerTest, OtherEventsGetNoHandleAndAreHarmless) {
  for (int type : {ncclProfileGroup, ncclProfileP2p, ncclProfileProxyOp}) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = static_cast<uint64_t>(type);
    void* h = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(prof_->startEvent(ctx_, &h, &d), ncclSuccess);
    EXPECT_EQ(h, nullptr) << "event type " << type;
  }
  // A kernel channel of a p2p operation has no collective of ours as parent.
  EXPECT_EQ(start_channel(nullptr, 0, 5), nullptr);
  EXPECT_EQ(prof_->stopEvent(nullptr), ncclSuccess);
  EXPECT_EQ(prof_->recordEventState(nullptr, ncclProfilerKernelChStop, nullptr), ncclSuccess);
  EXPECT_EQ(prof_->startEvent(ctx_, nullptr, nullptr), ncclSuccess);
}

TEST_F(PluginProfilerTest, ReadContinuesAfterAnIdAndHonoursTheLimit) {
  const uint64_t before = last_id();
  for (int i = 0; i < 5; ++i) start_coll("AllGather", "RING", "LL", 1, static_cast<uint64_t>(i));
  const auto firsts = read_after(before, 2);
  ASSERT_EQ(firsts.size(), 2u);
  EXPECT_EQ(firsts[0].id, before + 1);
  EXPECT_EQ(firsts[1].id, before + 2);
  const auto rest = read_after(firsts[1].id);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[2].seq_number, 4u);
  EXPECT_TRUE(read_after(rest[2].id).empty());
}

TEST_F(PluginProfilerTest, RingKeepsTheNewestRecordsAndDropsLateEventsOfOverwrittenOnes) {
  void* old_coll = start_coll("AllReduce", "TREE", "LL", 2);
  const uint64_t old_id = newest().id;
  void* old_channel = start_channel(old_coll, 0, 111);
  constexpr int kRing = DYNAMICCL_NCCL_PROFILER_RING_SIZE;
  for (int i = 0; i < kRing; ++i) start_coll("AllReduce", "RING", "SIMPLE", 4);
  const auto all = read_after(0, 2 * kRing);
  ASSERT_EQ(all.size(), static_cast<size_t>(kRing));
  EXPECT_EQ(all.front().id, old_id + 1);
  EXPECT_EQ(all.back().id, old_id + kRing);
  // The old collective's slot now holds the newest record: its late events must not
  // leak into it, and a new channel of it gets no handle.
  stop_channel(old_channel, 999);
  EXPECT_EQ(start_channel(old_coll, 1, 222), nullptr);
  const auto newest_record = newest();
  EXPECT_EQ(newest_record.id, old_id + kRing);
  EXPECT_EQ(newest_record.kernel_stop_ns, 0u);
  EXPECT_EQ(newest_record.kernel_channels_done, 0);
  EXPECT_EQ(read_after(old_id - 1, 1).at(0).id, old_id + 1) << "the old record is gone";
}

TEST_F(PluginProfilerTest, ConcurrentLaunchesGetDistinctRecords) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;  // all fit in the ring together
  const uint64_t before = last_id();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        void* coll = start_coll("AllReduce", "RING", "SIMPLE", 1, static_cast<uint64_t>(t));
        void* ch = start_channel(coll, 0, 10);
        stop_channel(ch, 20);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto got = read_after(before);
  ASSERT_EQ(got.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<uint64_t> ids;
  for (const auto& r : got) {
    ids.insert(r.id);
    EXPECT_EQ(r.kernel_channels_done, 1);
    EXPECT_EQ(r.kernel_stop_ns - r.kernel_start_ns, 10u);
  }
  EXPECT_EQ(ids.size(), got.size());
}

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
