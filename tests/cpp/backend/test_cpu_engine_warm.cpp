// The CPU engine's connection warm-up (engines/cpu/cpu_engine.h, warm_connections): run on every
// rank of groups of several sizes against engines that record what they are asked to move, each
// send must meet its receive (same pair, tag and size: a group's creation cannot hang on it) and
// every connection our schedules use must carry kWarmBytes in each direction.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "backend/null_engine.h"
#include "engines/cpu/cpu_engine.h"

namespace dynamiccl {
namespace {

// (from, to, tag, bytes) of one message, as its sender or its receiver sees it.
using Message = std::tuple<int, int, int, int64_t>;

class RecordingEngine : public c10d::Backend {
 public:
  RecordingEngine(int rank, int size, std::vector<Message>* sent, std::vector<Message>* received)
      : Backend(rank, size), rank_(rank), sent_(sent), received_(received) {}
  const std::string getBackendName() const override { return "recording"; }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int dst, int tag) override {
    sent_->emplace_back(rank_, dst, tag, t[0].nbytes());
    return c10::make_intrusive<testing::DoneWork>(t);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int src, int tag) override {
    received_->emplace_back(src, rank_, tag, t[0].nbytes());
    return c10::make_intrusive<testing::DoneWork>(t);
  }

 private:
  int rank_;
  std::vector<Message>*sent_, *received_;
};

TEST(CpuEngine, WarmsEveryConnectionOurSchedulesUseBothWays) {
  for (int n : {1, 2, 3, 4, 5, 8, 12, 64}) {
    std::vector<Message> sent, received;
    for (int r = 0; r < n; ++r) {
      CpuEngine engine(c10::make_intrusive<RecordingEngine>(r, n, &sent, &received),
                       std::chrono::milliseconds(1000));
      engine.warm_connections();
    }
    std::sort(sent.begin(), sent.end());
    std::sort(received.begin(), received.end());
    EXPECT_EQ(sent, received) << n << " ranks: a send without its receive, or the reverse";
    // Ring neighbours, tree parents / children and recursive partners: distances +-2^j.
    std::set<std::pair<int, int>> expected, warmed;
    for (int r = 0; r < n; ++r) {
      for (int d = 1; d < n; d *= 2) {
        expected.insert({r, (r + d) % n});
        expected.insert({r, (r - d + n) % n});
      }
    }
    for (const auto& [from, to, tag, bytes] : sent) {
      EXPECT_EQ(bytes, CpuEngine::kWarmBytes);
      EXPECT_NE(from, to);
      EXPECT_TRUE(warmed.insert({from, to}).second) << from << "->" << to << " twice";
    }
    EXPECT_EQ(warmed, expected) << n << " ranks";
  }
}

}  // namespace
}  // namespace dynamiccl
