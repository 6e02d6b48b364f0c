// getCollInfo reports every call through the logger NCCL hands to init, under the TUNING
// subsystem: the first call of each outcome on a communicator at INFO, later ones at TRACE.
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "table_abi.h"

namespace dynamiccl {
namespace testing {
namespace {

constexpr size_t kMiB = 1 << 20;

struct LogLine {
  ncclDebugLogLevel level;
  unsigned long flags;
  std::string text;
};

std::mutex g_lines_mutex;
std::vector<LogLine> g_lines;

// Stands in for NCCL's logger: keeps every message, formatted, whatever its level.
void capture(ncclDebugLogLevel level, unsigned long flags, const char* /*file*/, int /*line*/,
             const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(g_lines_mutex);
  g_lines.push_back({level, flags, text});
}

std::vector<LogLine> take_lines() {
  std::lock_guard<std::mutex> lock(g_lines_mutex);
  std::vector<LogLine> lines;
  lines.swap(g_lines);
  return lines;
}

class PluginTunerLogTest : public PluginTest {
 protected:
  static constexpr TableAbi kV5 = {5, 7};

  void SetUp() override {
    PluginTest::SetUp();
    ctx_ = kV5.init(8, 1, 0x5eed, capture);
    ASSERT_NE(ctx_, nullptr);
    take_lines();
  }
  void TearDown() override { EXPECT_EQ(kV5.fini(ctx_), ncclSuccess); }

  // One AllReduce getCollInfo on `ctx`; returns the lines it logged.
  std::vector<LogLine> call(void* ctx, CostTable& t, size_t bytes = kMiB) {
    take_lines();
    int n_channels = 0;
    EXPECT_EQ(kV5.get(ctx, DYNAMICCL_NCCL_COLL_ALLREDUCE, bytes, 1, t, &n_channels), ncclSuccess);
    return take_lines();
  }
  std::vector<LogLine> call(CostTable& t, size_t bytes = kMiB) { return call(ctx_, t, bytes); }

  void* ctx_ = nullptr;
};

// What one call logs: a single line under NCCL_TUNING.
void expect_one_line(const std::vector<LogLine>& lines, ncclDebugLogLevel level,
                     const std::string& text) {
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, level);
  EXPECT_EQ(lines[0].flags, static_cast<unsigned long>(NCCL_TUNING));
  EXPECT_EQ(lines[0].text, text);
}

const std::string kCall = "DynamICCL tuner: comm 0x5eed AllReduce 1048576 bytes numPipeOps 1 -> ";
const std::string kFirst = "; first on this communicator, the next ones at TRACE level";

TEST_F(PluginTunerLogTest, InitAnnouncesTheCommunicatorUnderInitAndTuning) {
  void* ctx = kV5.init(16, 2, 0xabc, capture);
  const auto lines = take_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, NCCL_LOG_INFO);
  EXPECT_EQ(lines[0].flags, static_cast<unsigned long>(NCCL_INIT | NCCL_TUNING));
  EXPECT_EQ(lines[0].text,
            "DynamICCL tuner: ABI v5, comm 0xabc, 16 ranks on 2 nodes, bound to a DynamICCL group");
  EXPECT_EQ(kV5.fini(ctx), ncclSuccess);
}

TEST_F(PluginTunerLogTest, AppliedAbstainedAndUnavailableCallsAreEachLogged) {
  CostTable t(7);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, 8);
  auto lines = call(t);
  ASSERT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  expect_one_line(lines, NCCL_LOG_INFO,
                  kCall + "applied (algo Ring, proto Simple, channels 8)" + kFirst);

  lines = call(t);
  ASSERT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_ABSTAINED);
  expect_one_line(lines, NCCL_LOG_INFO,
                  kCall + "abstained (nothing published on its channel)" + kFirst);

  t.mark_unavailable(DYNAMICCL_NCCL_ALGO_NVLS, DYNAMICCL_NCCL_PROTO_SIMPLE);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_NVLS,
                   DYNAMICCL_NCCL_PROTO_SIMPLE, -1);
  lines = call(t);
  ASSERT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_UNAVAILABLE);
  expect_one_line(lines, NCCL_LOG_INFO,
                  kCall +
                      "unavailable (algo NVLS, proto Simple, channels any: not offered for this "
                      "call, NCCL decides)" +
                      kFirst);
}

TEST_F(PluginTunerLogTest, LaterCallsOfTheSameOutcomeAreLoggedAtTrace) {
  CostTable t(7);
  for (int i = 0; i < 3; ++i) {
    plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, -1, DYNAMICCL_NCCL_PROTO_LL, -1);
    const std::string text = kCall + "applied (algo any, proto LL, channels any)";
    SCOPED_TRACE(i);
    expect_one_line(call(t), i == 0 ? NCCL_LOG_INFO : NCCL_LOG_TRACE,
                    i == 0 ? text + kFirst : text);
  }
}

TEST_F(PluginTunerLogTest, MismatchNamesThePublishedCall) {
  CostTable t(7);
  plugin().publish(DYNAMICCL_NCCL_COLL_ALLREDUCE, kMiB, DYNAMICCL_NCCL_ALGO_TREE,
                   DYNAMICCL_NCCL_PROTO_LL, 2);
  const auto lines = call(t, 2 * kMiB);
  ASSERT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_MISMATCHED);
  expect_one_line(lines, NCCL_LOG_INFO,
                  "DynamICCL tuner: comm 0x5eed AllReduce 2097152 bytes numPipeOps 1 -> mismatched "
                  "(the decision is for AllReduce 1048576 bytes alone and stays; NCCL decides)" +
                      kFirst);
}

TEST_F(PluginTunerLogTest, EachCommunicatorReportsItsFirstOutcomesAtInfo) {
  CostTable t(7);
  call(t);  // this communicator's first abstention
  void* other = kV5.init(8, 1, 0xbeef, capture);
  EXPECT_EQ(call(t).at(0).level, NCCL_LOG_TRACE);
  const auto lines = call(other, t);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, NCCL_LOG_INFO);
  EXPECT_EQ(lines[0].text.rfind("DynamICCL tuner: comm 0xbeef ", 0), 0u) << lines[0].text;
  EXPECT_EQ(kV5.fini(other), ncclSuccess);
}

TEST_F(PluginTunerLogTest, EveryAbiLogsThroughItsInitsLogger) {
  for (const TableAbi& abi : kTableAbis) {
    void* ctx = abi.init(8, 1, 0x1, capture);
    plugin().publish(DYNAMICCL_NCCL_COLL_BROADCAST, 4096, DYNAMICCL_NCCL_ALGO_RING, -1, -1);
    CostTable t(abi.num_algo);
    take_lines();
    int n_channels = 0;
    abi.get(ctx, DYNAMICCL_NCCL_COLL_BROADCAST, 4096, 1, t, &n_channels);
    const auto lines = take_lines();
    ASSERT_EQ(lines.size(), 1u) << abi;
    EXPECT_NE(lines[0].text.find(" Broadcast 4096 bytes numPipeOps 1 -> applied (algo Ring, "),
              std::string::npos)
        << abi << ": " << lines[0].text;
    EXPECT_EQ(abi.fini(ctx), ncclSuccess);
  }
  void* ctx = nullptr;
  ASSERT_EQ(plugin().v2()->init(8, 1, capture, &ctx), ncclSuccess);
  plugin().publish(DYNAMICCL_NCCL_COLL_BROADCAST, 4096, DYNAMICCL_NCCL_ALGO_RING,
                   DYNAMICCL_NCCL_PROTO_LL, -1);
  take_lines();
  int algorithm = -1, protocol = -1, n_channels = 0;
  plugin().v2()->getCollInfo(ctx, ncclFuncBroadcast, 4096, 0, 0, 1, &algorithm, &protocol,
                             &n_channels);
  const auto lines = take_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].text.find(" -> applied (algo Ring, proto LL, channels any)"),
            std::string::npos)
      << lines[0].text;
  EXPECT_EQ(plugin().v2()->destroy(ctx), ncclSuccess);
}

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
