// An arm measured far beyond its prior prices it in the group's other states of the same calls, and
// a channel cap so measured prices the other caps (policy/arm_evidence.h): the states of the same
// calls do not pay the same first probe again, and the footprint descent does not walk on to caps
// the evidence rules out. A cap measured far cheaper than its price lowers the price of the caps.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "contexts.h"
#include "policy/arm_evidence.h"
#include "policy/learner.h"
#include "round_feed.h"

namespace dynamiccl {
namespace {

TEST(ArmEvidence, ACapsFactorPricesArmsHoldingNoMoreInTheSameOpAndSizeBin) {
  ArmEvidenceBoard board;
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.5), 1.0);
  board.post(/*state=*/0, /*arm=*/3, OpKind::kAllReduce, 27, /*footprint=*/0.5,
             /*arm_factor=*/1.0, /*cap_factor=*/8.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.5), 8.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.25), 8.0);  // holds less: as far off
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.75), 1.0);  // holds more: not said
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 26, 0.5), 1.0);   // another size bin
  EXPECT_EQ(board.cap_factor(OpKind::kAllGather, 27, 0.5), 1.0);   // another op
  EXPECT_EQ(board.arm_factor(OpKind::kAllReduce, 27, 3), 1.0);     // nothing said of the arm
  // Another state's word on the same arm stands beside it; the largest prices.
  board.post(1, 3, OpKind::kAllReduce, 27, 0.5, 1.0, 4.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.5), 8.0);
  // Later costs within kEvidenceFactor of the prior withdraw the first state's word.
  board.post(0, 3, OpKind::kAllReduce, 27, 0.5, 1.0, 1.2);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.5), 4.0);
  board.post(1, 3, OpKind::kAllReduce, 27, 0.5, 1.0, kEvidenceFactor);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.5), 1.0);
}

TEST(ArmEvidence, ACapMeasuredFarCheaperThanItsPriceLowersThePriceOfCapsHoldingNoMore) {
  ArmEvidenceBoard board;
  board.post(/*state=*/0, /*arm=*/3, OpKind::kAllReduce, 27, /*footprint=*/0.5,
             /*arm_factor=*/1.0, /*cap_factor=*/0.5);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.25), 0.5);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.75), 1.0);  // holds more: not said
  // Another state's cheaper word: the cheapest prices.
  board.post(1, 3, OpKind::kAllReduce, 27, 0.5, 1.0, 0.25);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.25), 0.25);
  // A dearer word wins over any cheaper one.
  board.post(2, 4, OpKind::kAllReduce, 27, 0.5, 1.0, 3.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.25), 3.0);
  board.post(2, 4, OpKind::kAllReduce, 27, 0.5, 1.0, 1.0);
  // Within kEvidenceFactor of the prior, in either direction, a word is withdrawn.
  board.post(1, 3, OpKind::kAllReduce, 27, 0.5, 1.0, 1.0 / kEvidenceFactor);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.25), 0.5);
  board.post(0, 3, OpKind::kAllReduce, 27, 0.5, 1.0, 0.9);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.25), 1.0);
}

TEST(ArmEvidence, ACapsCheaperWordAlsoPricesTheCapsOfCallsTwiceAsLarge) {
  ArmEvidenceBoard board;
  board.post(/*state=*/0, /*arm=*/3, OpKind::kAllReduce, 24, /*footprint=*/0.5,
             /*arm_factor=*/1.0, /*cap_factor=*/0.5);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 25, 0.25), 0.5);  // the next bin
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 25, 0.75), 1.0);  // holds more: not said
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 26, 0.25), 1.0);  // two bins up: not said
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 23, 0.25), 1.0);  // smaller calls: not said
  EXPECT_EQ(board.cap_factor(OpKind::kAllGather, 25, 0.25), 1.0);  // another op
  // A dearer word of the bin itself wins over it; one of the bin below says nothing there.
  board.post(1, 3, OpKind::kAllReduce, 25, 0.5, 1.0, 3.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 25, 0.25), 3.0);
  board.post(1, 3, OpKind::kAllReduce, 25, 0.5, 1.0, 1.0);
  board.post(2, 4, OpKind::kAllReduce, 24, 0.5, 1.0, 3.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 24, 0.25), 3.0);
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 25, 0.25), 0.5);
}

TEST(ArmEvidence, AnArmsFactorPricesTheSameArmInTheSameOpAndSizeBin) {
  ArmEvidenceBoard board;
  board.post(/*state=*/0, /*arm=*/2, OpKind::kAllReduce, 27, /*footprint=*/1.0,
             /*arm_factor=*/9.0, /*cap_factor=*/9.0);
  EXPECT_EQ(board.arm_factor(OpKind::kAllReduce, 27, 2), 9.0);
  EXPECT_EQ(board.arm_factor(OpKind::kAllReduce, 27, 3), 1.0);  // another arm
  EXPECT_EQ(board.arm_factor(OpKind::kAllReduce, 26, 2), 1.0);  // another size bin
  EXPECT_EQ(board.arm_factor(OpKind::kAllGather, 27, 2), 1.0);  // another op
  // An arm holding all the default holds is no cap: it says nothing of the caps.
  EXPECT_EQ(board.cap_factor(OpKind::kAllReduce, 27, 0.5), 1.0);
  board.post(0, 2, OpKind::kAllReduce, 27, 1.0, 1.4, 1.0);  // within kEvidenceFactor: withdrawn
  EXPECT_EQ(board.arm_factor(OpKind::kAllReduce, 27, 2), 1.0);
}

// A communicator whose channel count the prior under-estimates eightfold: "ring/c2" holds half the
// channels the prior assumes and is priced at 2x "ring" (NCCL's own choice here), "ring/c1" a
// quarter at 4x; they run at 16x and 32x.
class UnderCountedChannelsCatalog : public ArmCatalog {
 public:
  UnderCountedChannelsCatalog() {
    for (const char* name : {"default", "ring", "ring/c2", "ring/c1"}) {
      arms_.push_back(Arm{name, Action{}});
    }
    for (int arm = 1; arm <= 3; ++arm) {
      arms_[arm].action.algo = 1;
      arms_[arm].action.proto = 2;
    }
    arms_[2].action.channels = 2;
    arms_[3].action.channels = 1;
  }
  const std::vector<Arm>& arms(OpKind) const override { return arms_; }
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override {
    return arm < 2 ? 100.0 : 100.0 * (1 << (arm - 1));
  }
  double footprint(OpKind, uint16_t arm, uint64_t) const override {
    return arm < 2 ? 1.0 : 1.0 / (1 << (arm - 1));
  }
  int default_channels(OpKind, uint64_t) const override { return 4; }

 private:
  std::vector<Arm> arms_;
};
constexpr double kCallUs[] = {100, 100, 1600, 3200};

// Two protocols on all the channels: "ring/LL", priced at 1.9x the default, runs 17x (NCCL's
// socket transport, benchmarks/gpu/results.md, (f)).
class SlowProtocolCatalog : public ArmCatalog {
 public:
  SlowProtocolCatalog() {
    arms_.push_back(Arm{"default", Action{}});
    arms_.push_back(Arm{"ring/LL", Action{}});
    arms_[1].action.algo = 1;
    arms_[1].action.proto = 0;
  }
  const std::vector<Arm>& arms(OpKind) const override { return arms_; }
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override {
    return arm == 0 ? 100.0 : 190.0;
  }

 private:
  std::vector<Arm> arms_;
};
constexpr double kSlowProtocolUs[] = {100, 1700};

constexpr uint64_t kBucketBytes = 64 << 20;

// Per step, four overlapped buckets and, from step `exposed_from`, an exposed last bucket of the
// same size (two states of one op and size bin), for 1500 steps; from step `slower_from` every arm
// costs twice as much. NCCL reports running the default's calls on `nccl_channels` (0: an NCCL
// before 2.30, which says nothing).
struct Buckets {
  int nccl_channels = 0;
  std::shared_ptr<const ArmCatalog> catalog = std::make_shared<UnderCountedChannelsCatalog>();
  const double* call_us = kCallUs;
  int exposed_from = 100;
  int slower_from = 1500;
};

std::vector<StateStats> run_buckets(const Buckets& b) {
  LearnerConfig cfg;
  Learner learner(cfg, b.catalog);
  const CollectiveContext bucket = overlapped_bucket(kBucketBytes);
  CollectiveContext last = bucket;
  last.exposure = Exposure::kExposed;
  RoundFeed feed;
  for (int step = 0; step < 1500; ++step) {
    double step_us = 5000;
    for (int c = 0; c < (step < b.exposed_from ? 4 : 5); ++c) {
      const Decision d = learner.decide(c < 4 ? bucket : last);
      const double call_us = b.call_us[d.arm] * (step < b.slower_from ? 1 : 2);
      step_us += call_us;
      if (d.measure) {
        // A cap runs on its cap, any other arm on all of the communicator's channels.
        const int channels = b.nccl_channels > 0 && d.action.channels > 0 ? d.action.channels
                                                                          : b.nccl_channels;
        feed.measured(d, static_cast<float>(call_us), static_cast<uint16_t>(channels));
      }
      feed.end_call(learner);
    }
    feed.end_step(learner, step_us);
  }
  return learner.stats();
}
std::vector<StateStats> run_buckets(int nccl_channels) {
  Buckets b;
  b.nccl_channels = nccl_channels;
  return run_buckets(b);
}

uint64_t samples(const StateStats& state, const std::string& arm) {
  for (const ArmStats& a : state.arms) {
    if (a.name == arm) return a.samples;
  }
  return 0;
}

bool has_event(const StateStats& state, const std::string& what) {
  return std::any_of(state.events.begin(), state.events.end(),
                     [&](const StateEvent& e) { return e.what == what; });
}

TEST(ArmEvidence, ACapMeasuredFarBeyondItsPriceIsNotProbedAgainByTheSameCalls) {
  // NCCL says nothing of its channels. The overlapped state's descent awaits "ring/c2" (the
  // prior rules it out, its first cost might not) and measures it at 16x "ring". Without the
  // evidence, the descent then awaited "ring/c1" and the exposed state, once it had seen enough
  // calls to make a first probe worth it at the prior's price, probed "ring/c2" and "ring/c1": 3
  // more probes, each costing 15-31 default calls.
  const std::vector<StateStats> states = run_buckets(/*nccl_channels=*/0);
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(samples(states[0], "ring/c2"), 1u);  // the overlapped state's one probe
  EXPECT_EQ(samples(states[0], "ring/c1"), 0u);  // priced at 32x by c2's costs: not a rung
  EXPECT_EQ(samples(states[1], "ring/c2"), 0u);  // the exposed state: priced at 16x, unprobed
  EXPECT_EQ(samples(states[1], "ring/c1"), 0u);
  EXPECT_TRUE(has_event(states[1], "priced by a measured cap"));
  for (const StateStats& st : states) EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
}

TEST(ArmEvidence, ACapMeasuredFarCheaperThanItsPriceLowersThePriceOfTheGroupsCaps) {
  // A bandwidth-bound call: "ring/c2", priced at 2x "ring", ties with it, and "ring/c1" (4x) costs
  // 10% more. The overlapped state measures c2 at half its price, which prices c1 at 2x instead of
  // 4x in that state, and both caps at half their price in the exposed one (the simulated LLM
  // step's quarter-channel rung waited for the budget of a 3.5x probe while the half it lies below
  // ran at 1.0-1.08x against a 1.87x price; benchmarks/sim/step_time.md).
  Buckets b;
  static constexpr double kBandwidthBoundUs[] = {100, 100, 100, 110};
  b.call_us = kBandwidthBoundUs;
  const std::vector<StateStats> states = run_buckets(b);
  ASSERT_EQ(states.size(), 2u);
  for (const StateStats& st : states) EXPECT_TRUE(has_event(st, "priced lower by a measured cap"));
}

Buckets slow_protocol() {
  Buckets b;
  b.catalog = std::make_shared<SlowProtocolCatalog>();
  b.call_us = kSlowProtocolUs;
  return b;
}

// "ring/LL"'s first probe was paid once in the group: by the overlapped state, not the exposed one.
void expect_paid_once(const std::vector<StateStats>& states) {
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(samples(states[0], "ring/LL"), 1u);
  EXPECT_EQ(samples(states[1], "ring/LL"), 0u);
}

TEST(ArmEvidence, AnArmMeasuredFarBeyondItsPriceIsNotProbedAgainByTheSameCalls) {
  // The overlapped state probes "ring/LL" once, at 17x the default (8.9x its price). Without the
  // evidence the exposed state, once it had seen enough calls to make a first probe worth it at
  // the prior's price, paid that probe again.
  const std::vector<StateStats> states = run_buckets(slow_protocol());
  expect_paid_once(states);
  EXPECT_TRUE(has_event(states[1], "priced by its measured costs"));
  for (const StateStats& st : states) EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
}

TEST(ArmEvidence, AWordOutlivesARegimeChangeOfTheStateThatSaidIt) {
  // The overlapped state probes "ring/LL", then every cost doubles: the default's alarm re-opens
  // the state and every cost it had is dropped. The exposed state comes after that. The word on
  // an arm far beyond the default (kFarBeyondRatio) stands, so neither pays the probe again.
  // Withdrawn with the costs, it let both pay it; and kept, it did not stop the exposed state's
  // re-check of its runner-up, which, when no other arm has costs, was the first arm without
  // them: "ring/LL".
  Buckets b = slow_protocol();
  b.slower_from = 300;
  b.exposed_from = 600;
  const std::vector<StateStats> states = run_buckets(b);
  expect_paid_once(states);
  EXPECT_TRUE(has_event(states[0], "reopened: the incumbent got slower"));
}

// NCCL >= 2.30 reports running the default on 32 channels, eight times the 4 the prior assumed:
// both caps hold under a quarter of them (kMinCapShare) and are dropped before any probe, in both
// states. On 8 channels "ring/c2" holds a quarter and stays (the descent probes it once), "ring/c1"
// is dropped.
TEST(ArmEvidence, CapsHoldingUnderAQuarterOfTheChannelsNcclReportsAreDropped) {
  const std::string dropped = "caps under a quarter of NCCL's channels dropped";
  const std::vector<StateStats> states = run_buckets(/*nccl_channels=*/32);
  ASSERT_EQ(states.size(), 2u);
  for (const StateStats& st : states) {
    EXPECT_EQ(st.nccl_channels, 32);
    EXPECT_EQ(samples(st, "ring/c2"), 0u);
    EXPECT_EQ(samples(st, "ring/c1"), 0u);
    EXPECT_TRUE(has_event(st, dropped));
    EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
  }
  const std::vector<StateStats> eight = run_buckets(/*nccl_channels=*/8);
  EXPECT_EQ(samples(eight[0], "ring/c2"), 1u);
  EXPECT_EQ(samples(eight[0], "ring/c1"), 0u);
  EXPECT_TRUE(has_event(eight[0], dropped));
}

// What NCCL >= 2.30 reports running the default's calls on (CallOutcome::channels, agreed over
// ranks) is kept beside the channels the prior assumed: the most over the default's calls; a
// cap's report (it ran on fewer by design) and calls with none say nothing.
TEST(ArmEvidence, StatsShowTheChannelsNcclRanTheDefaultOnBesideThePriorsCount) {
  LearnerConfig cfg;
  Learner learner(cfg, std::make_shared<UnderCountedChannelsCatalog>());
  const Decision d = learner.decide(overlapped_bucket(kBucketBytes));
  EXPECT_EQ(learner.stats().at(0).assumed_channels, 4);
  EXPECT_EQ(learner.stats().at(0).nccl_channels, 0);
  RoundResult round;
  round.calls.push_back({d.state_id, kDefaultArm, 100.f, false, false, 24});
  round.calls.push_back({d.state_id, kDefaultArm, 100.f, false, false, 32});
  round.calls.push_back({d.state_id, kDefaultArm, 100.f, false, false, 0});
  round.calls.push_back({d.state_id, 2, 1600.f, true, false, 2});  // ring/c2
  learner.apply_round(round);
  EXPECT_EQ(learner.stats().at(0).nccl_channels, 32);
}

}  // namespace
}  // namespace dynamiccl
