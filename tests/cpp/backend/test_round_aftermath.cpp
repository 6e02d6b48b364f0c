// What a CPU consensus round costs the calling thread (backend/round_aftermath.h), on a made-up
// timeline of learned calls: K = 4, a usual lap of 100 µs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/round_aftermath.h"

namespace dynamiccl {
namespace {

constexpr int kK = 4;
constexpr int64_t kUs = 1000;  // ns

struct Timeline {
  RoundAftermath aftermath{kK};
  std::vector<CallRecord> records = std::vector<CallRecord>(2 * kK);
  uint64_t next = 0;

  // One learned CPU call of state 0, issued at `start_us`.
  void call(int64_t start_us, bool probe = false, bool after_probe = false) {
    CallRecord& r = records[next % records.size()];
    r = CallRecord{};
    r.start_ns = start_us * kUs;
    r.learned = true;
    r.probe = probe;
    r.after_probe = after_probe;
    ++next;
  }
  // Calls 100 µs apart until the next boundary.
  void usual_calls_from(int64_t start_us) {
    do {
      call(start_us);
      start_us += 100;
    } while (next % kK != 0);
  }
  void boundary(bool applied, int64_t completed_us, double apply_us, bool started) {
    aftermath.boundary(next, records, applied, completed_us * kUs, apply_us, started);
  }
  // Two windows of usual calls (the usual lap learned from the first), then a round starts at
  // call 8.
  void start_a_round_at_call_8() {
    usual_calls_from(0);
    boundary(false, 0, 0, false);
    usual_calls_from(400);
    boundary(false, 0, 0, true);
  }
};

// A round started at call 8 (its start made that lap 150 µs), its all-reduce completed at
// 1,200 µs (after calls 8 and 9 were issued), applied at call 12 (20 µs): its price is what the
// laps from its boundary to call 10 (the first issued after it completed) took over 100 µs, and
// the apply.
TEST(RoundAftermath, ThePriceIsWhatItTookFromTheCallingThreadsLapsAndItsApply) {
  Timeline t;
  t.start_a_round_at_call_8();
  t.call(850);   // lap 7: 150
  t.call(1150);  // lap 8: 300
  t.call(1350);  // lap 9: 200
  t.call(1500);  // lap 10: 150, the first call issued after 1,200 µs
  t.boundary(true, 1200, 20, false);
  EXPECT_DOUBLE_EQ(t.aftermath.take_sample(), 50 + 200 + 100 + 50 + 20);
  EXPECT_TRUE(std::isnan(t.aftermath.take_sample()));  // taken
  t.usual_calls_from(1600);
  t.boundary(false, 0, 0, false);
  EXPECT_TRUE(std::isnan(t.aftermath.take_sample()));  // no round since
}

// A probe's own extra is charged to it, and the call after one starts with the probe's skew:
// neither prices the round. A stalled lap counts 4x the usual at most.
TEST(RoundAftermath, ProbesTheCallAfterAProbeAndStallsDoNotPriceTheRound) {
  Timeline t;
  t.start_a_round_at_call_8();
  t.call(800, /*probe=*/true);          // lap 7: 100, at the boundary
  t.call(1800, false, /*after=*/true);  // lap 8: 1,000, the probe's
  t.call(2700);                         // lap 9: 900, the probe's skew
  t.call(3700);                         // lap 10: 1,000, a stall: 400 counted
  t.boundary(true, 3000, 0, false);
  EXPECT_DOUBLE_EQ(t.aftermath.take_sample(), 300);
}

// Applying a round is charged to it, not to the next round, whose boundary lap holds it too;
// the samples of rounds not carried yet are averaged.
TEST(RoundAftermath, AnApplyIsChargedToTheRoundItApplies) {
  Timeline t;
  t.start_a_round_at_call_8();
  t.call(840);  // lap 7: 140 (the start)
  t.call(940);
  t.call(1040);
  t.call(1140);
  t.boundary(true, 850, 30, true);  // round 8 applied in 30 µs, round 12 started
  t.call(1310);                     // lap 11: 170 = 100 + 30 (the apply) + 40 (the start)
  t.call(1410);
  t.call(1510);
  t.call(1610);
  t.boundary(true, 1320, 10, false);
  EXPECT_DOUBLE_EQ(t.aftermath.take_sample(), ((40 + 30) + (40 + 10)) / 2.0);
}

}  // namespace
}  // namespace dynamiccl
