// Overlapped states and step trials: a challenger that is faster per call is adopted only when
// the steps it runs in are shorter (docs/learner.md, "Step trials"). A synthetic step: a
// fixed compute time, plus per call of the overlapped state what its arm adds to the step (an
// arm that holds more of the machine slows the compute beside it), with Gaussian noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "contexts.h"
#include "policy/learner.h"
#include "policy/step_trial_board.h"
#include "round_feed.h"

namespace dynamiccl {
namespace {

constexpr int kCallsPerStep = 4;  // the state's calls (buckets) per step
constexpr double kComputeUs = 5000;
constexpr uint64_t kBucketBytes = 1 << 20;  // the overlapped state's calls: 1 MiB DDP buckets

// Named arms, all priced alike: arm 0 is the engine default, `setup` makes each other arm.
class NamedArmsCatalog : public ArmCatalog {
 public:
  NamedArmsCatalog(std::initializer_list<const char*> names, void (*setup)(Arm&, int)) {
    for (const char* name : names) {
      Arm a;
      a.name = name;
      if (!arms_.empty()) setup(a, static_cast<int>(arms_.size()));
      arms_.push_back(a);
    }
  }
  const std::vector<Arm>& arms(OpKind) const override { return arms_; }
  double prior_cost_us(OpKind, uint16_t, uint64_t, int) const override { return 100; }

 private:
  std::vector<Arm> arms_;
};

void another_algorithm(Arm& a, int i) { a.action.algo = static_cast<int8_t>(i); }

class TwoArmCatalog : public NamedArmsCatalog {
 public:
  TwoArmCatalog() : NamedArmsCatalog({"default", "fast"}, another_algorithm) {}
};

// "default", "fast" and its per-call twin "twin", all holding the same.
class ThreeArmCatalog : public NamedArmsCatalog {
 public:
  ThreeArmCatalog() : NamedArmsCatalog({"default", "fast", "twin"}, another_algorithm) {}
};

// An engine whose arms hold less and less of the machine: "default" (all of it), "half", "quarter".
class FootprintCatalog : public NamedArmsCatalog {
 public:
  FootprintCatalog()
      : NamedArmsCatalog({"default", "half", "quarter"},
                         [](Arm& a, int i) { a.action.channels = static_cast<int16_t>(16 >> i); }) {
  }
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override {
    return 100 + 10 * arm;
  }
  double footprint(OpKind, uint16_t arm, uint64_t) const override { return 1.0 / (1 << arm); }
};

struct ArmTruth {
  double call_us;       // the call's own duration
  double step_cost_us;  // what one call adds to the step
};

// The exposed last bucket of run_states(): a call a step, adding its duration to the step, from
// the first step at which `from` holds.
struct LastBucket {
  std::vector<double> call_us;
  std::function<bool(const Learner&)> from;
  // Where its probes ran: in steps where the overlapped state ran another arm, and in the others.
  int* probes_beside_other_arm = nullptr;
  int* probes_beside_default = nullptr;
};

// Gaussian noise: relative on a call's cost (floored at 0.2 of it), absolute on a step's time.
// With `gap_every`, every such step also holds `gap_us` of other work (a checkpoint, an
// evaluation pass, another group's calls).
struct Noise {
  double call = 0.02;
  double step_us = 20.0;
  int gap_every = 0;
  double gap_us = 0;
};

// Runs `steps` steps of one overlapped state (kCallsPerStep calls a step, each adding its arm's
// step cost) and, with `last`, an exposed one; returns the learner's stats (one per state).
std::vector<StateStats> run_states(Learner& learner, const std::vector<ArmTruth>& truth, int steps,
                                   bool mark_steps, const LastBucket* last, uint32_t seed,
                                   std::vector<uint16_t>* last_arms = nullptr,
                                   Noise noise_level = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  const CollectiveContext overlapped = overlapped_bucket(kBucketBytes);
  CollectiveContext exposed = overlapped;
  exposed.effective_bytes = 64 << 10;
  exposed.exposure = Exposure::kExposed;
  RoundFeed feed;
  bool last_started = false;
  for (int s = 0; s < steps; ++s) {
    last_started = last_started || (last && last->from(learner));
    double step_us = kComputeUs;
    const int n = kCallsPerStep + (last_started ? 1 : 0);
    bool other_arm = false;  // the overlapped state ran another arm than the default this step
    for (int c = 0; c < n; ++c) {
      const bool is_last = c == kCallsPerStep;
      const Decision d = learner.decide(is_last ? exposed : overlapped);
      const double call_us = is_last ? last->call_us.at(d.arm) : truth.at(d.arm).call_us;
      other_arm = other_arm || (!is_last && d.arm != 0);
      if (is_last && d.probe && last->probes_beside_other_arm) {
        ++*(other_arm ? last->probes_beside_other_arm : last->probes_beside_default);
      }
      step_us += is_last ? call_us : truth.at(d.arm).step_cost_us;
      if (last_arms && !is_last && s == steps - 1) last_arms->push_back(d.arm);
      if (d.measure) {
        feed.measured(
            d, static_cast<float>(call_us * std::max(0.2, 1.0 + noise_level.call * noise(rng))));
      }
      feed.end_call(learner);
    }
    const bool gap = noise_level.gap_every > 0 && s % noise_level.gap_every == 0;
    if (mark_steps) {
      feed.end_step(learner,
                    step_us + noise_level.step_us * noise(rng) + (gap ? noise_level.gap_us : 0.0));
    }
  }
  return learner.stats();
}

// One overlapped state: its stats.
StateStats run_steps(Learner& learner, const std::vector<ArmTruth>& truth, int steps,
                     bool mark_steps, std::vector<uint16_t>* last_arms = nullptr) {
  return run_states(learner, truth, steps, mark_steps, nullptr, 7, last_arms).at(0);
}

LearnerConfig config() {
  LearnerConfig cfg;
  for (HeadConfig& h : cfg.heads) h = HeadConfig{};
  return cfg;
}

TEST(StepTrials, AnArmFasterPerCallButSlowerForTheStepIsNotAdopted) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  // "fast" halves the call but costs the step 300 µs a call more (it takes cores from compute).
  const StateStats st = run_steps(learner, {{100, 10}, {50, 310}}, 400, true);
  EXPECT_EQ(st.exposure, Exposure::kOverlapped);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
  EXPECT_EQ(st.trial.challenger, "fast");
  // Rejected on the evidence or because the pairs spent the do-no-harm budget: either way early.
  EXPECT_EQ(st.trial.verdict.rfind("rejected", 0), 0u) << st.trial.verdict;
  EXPECT_LE(st.trial.pairs, static_cast<uint64_t>(HeadConfig{}.trial_pairs));
  EXPECT_GT(st.trial.mean_delta_us, 1000);  // 4 calls x 300 µs
}

TEST(StepTrials, AnArmThatShortensTheStepIsAdopted) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  std::vector<uint16_t> last;
  const StateStats st = run_steps(learner, {{100, 60}, {50, 10}}, 400, true, &last);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "fast");
  EXPECT_EQ(st.trial.verdict, "adopted: shorter steps");
  EXPECT_LT(st.trial.mean_delta_us, -150);
  EXPECT_TRUE(std::all_of(last.begin(), last.end(), [](uint16_t a) { return a == 1; }));
}

// A loop of exposed calls in a group that marks no steps: each consensus round is a step
// (StepSource::kRoundsJudged), whose time is what its calls took on the wall clock. Each arm's
// call is measured at `call_us`, and its window pays `wall_us` a call (on a CPU shared with other
// work, our schedules measured cheaper per call and ran 1.2-1.6x gloo on every call:
// benchmarks/results/cost_statistics.md). Returns the state's stats.
// `round_noise`: Gaussian noise on each round's wall time, relative (a round of 16 tiny calls on
// 4 ranks sharing 2 cores varies by about 45% of its mean).
StateStats run_rounds_as_steps(bool rounds_are_steps, const std::vector<ArmTruth>& truth,
                               double round_noise = 0, uint32_t seed = 7) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  if (rounds_are_steps) learner.set_step_source(StepSource::kRoundsJudged);
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  CollectiveContext exposed = overlapped_bucket(kBucketBytes);
  exposed.exposure = Exposure::kExposed;
  RoundFeed feed;
  double window_us = 0;
  for (int call = 1; call <= 6000; ++call) {
    const Decision d = learner.decide(exposed);
    const ArmTruth& arm = truth.at(d.arm);
    window_us += arm.step_cost_us * std::max(0.2, 1.0 + 0.05 * noise(rng));
    if (d.measure) {
      feed.measured(d, static_cast<float>(arm.call_us * std::max(0.2, 1.0 + 0.02 * noise(rng))));
    }
    if (!feed.end_call(learner)) continue;
    // The round's boundary ends the step (at the next call, as DDP's last bucket does).
    if (rounds_are_steps) {
      feed.end_step(learner, window_us * std::max(0.2, 1.0 + round_noise * noise(rng)));
    }
    window_us = 0;
  }
  return learner.stats().at(0);
}

TEST(StepTrials, WhereRoundsAreStepsAnExposedArmFasterPerCallButSlowerOnTheWallIsNotAdopted) {
  // "fast" measures half the default per call, and its calls cost the loop twice as much.
  const std::vector<ArmTruth> truth = {{100, 100}, {50, 200}};
  const StateStats per_call = run_rounds_as_steps(false, truth);
  EXPECT_EQ(per_call.exposure, Exposure::kExposed);
  EXPECT_EQ(per_call.arms.at(per_call.incumbent).name, "fast");  // as without rounds as steps
  const StateStats st = run_rounds_as_steps(true, truth);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
  EXPECT_EQ(st.trial.challenger, "fast");
  EXPECT_EQ(st.trial.verdict.rfind("rejected", 0), 0u) << st.trial.verdict;
  EXPECT_GT(st.trial.mean_delta_us, 1000);  // 16 calls x 100 µs
}

TEST(StepTrials, WhereRoundsAreStepsAnExposedArmFasterOnTheWallIsAdopted) {
  const StateStats st = run_rounds_as_steps(true, {{100, 100}, {50, 50}});
  EXPECT_EQ(st.arms.at(st.incumbent).name, "fast");
  EXPECT_EQ(st.trial.verdict, "adopted: shorter steps");
  EXPECT_LT(st.trial.mean_delta_us, -500);
}

// A verdict before trial_pairs needs evidence the stronger the fewer the pairs: a clear effect
// ends its trial early, a faint one is judged on trial_pairs or more, as before.
TEST(StepTrials, AClearEffectOnTheStepEndsItsTrialEarlyAFaintOneWaitsForTrialPairs) {
  const uint64_t wanted = static_cast<uint64_t>(HeadConfig{}.trial_pairs);
  Learner clear_learner(config(), std::make_shared<TwoArmCatalog>());
  const StateStats clear = run_steps(clear_learner, {{100, 60}, {50, 10}}, 400, true);
  EXPECT_EQ(clear.trial.verdict, "adopted: shorter steps");
  EXPECT_LT(clear.trial.pairs, wanted);
  Learner faint_learner(config(), std::make_shared<TwoArmCatalog>());
  const StateStats faint = run_steps(faint_learner, {{100, 60}, {50, 45}}, 400, true);
  EXPECT_EQ(faint.trial.verdict, "adopted: shorter steps");
  EXPECT_GE(faint.trial.pairs, wanted);
}

TEST(StepTrials, NoEffectOnTheStepKeepsTheDefault) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  // Hidden entirely: the step does not change, whatever the call takes.
  const StateStats st = run_steps(learner, {{100, 0}, {50, 0}}, 600, true);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
  EXPECT_EQ(st.trial.verdict, "no effect on the step: kept");
  // Futile at its first look (a third of max_trial_pairs): its pairs do not show the step shorter.
  const uint64_t max_pairs = static_cast<uint64_t>(HeadConfig{}.max_trial_pairs);
  EXPECT_GE(st.trial.pairs, max_pairs / 3);
  EXPECT_LT(st.trial.pairs, max_pairs / 2);
}

bool has_event(const StateStats& st, const std::string& what) {
  return std::any_of(st.events.begin(), st.events.end(),
                     [&](const StateEvent& e) { return e.what == what; });
}

// Where rounds are the steps, per call does not follow the wall clock (that is why they are
// judged): a faster arm's trial does not pay back, and waits for the budget like any other.
TEST(StepTrials, WhereRoundsAreStepsAFasterArmsTrialWaitsForTheBudget) {
  constexpr int kSeeds = 20;
  int over_budget = 0, adopted = 0, trialed = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    // "fast" measures half the default per call; its rounds take 30% longer on the wall, in 45%
    // noise a round (4 B, 4 ranks on 2 cores).
    const StateStats st = run_rounds_as_steps(true, {{100, 100}, {50, 130}}, 0.45, seed);
    over_budget += st.extra_us > 1.25 * st.budget_us;
    adopted += st.arms.at(st.incumbent).name == "fast";
    trialed += has_event(st, "step trial");
  }
  std::printf("over 1.25x the budget: %d, adopted: %d, trialed: %d of %d\n", over_budget, adopted,
              trialed, kSeeds);
  EXPECT_GE(trialed, kSeeds / 2);
  EXPECT_LE(over_budget, 1);  // 6 of 20 when its trial paid back
  EXPECT_LE(adopted, 1);
}

// A step that holds other work is no arm's doing: an overlapped bucket's arm faster per call
// without effect on the step, in steps of which every seventh also holds 160 ms of other work
// (~25 steps' time), is not adopted, and no such step lands whole in its state's ledger.
TEST(StepTrials, AStepHoldingOtherWorkIsNoArmsDoing) {
  constexpr int kSeeds = 20;
  constexpr double kGapUs = 160000;
  int adopted = 0, gap_in_ledger = 0, trialed = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    Learner learner(config(), std::make_shared<TwoArmCatalog>());
    const StateStats st = run_states(learner, {{100, 300}, {50, 300}}, 1500, true, nullptr, seed,
                                     nullptr, Noise{0.02, 100, 7, kGapUs})
                              .at(0);
    adopted += st.arms.at(st.incumbent).name == "fast";
    gap_in_ledger += std::fabs(st.extra_us) > kGapUs / 4;
    trialed += has_event(st, "step trial");
  }
  std::printf("trialed: %d, adopted: %d, a ledger moved by a quarter of a gap: %d of %d\n", trialed,
              adopted, gap_in_ledger, kSeeds);
  EXPECT_GE(trialed, kSeeds / 2);
  EXPECT_LE(adopted, 1);
  EXPECT_LE(gap_in_ledger, 1);
}

TEST(StepTrials, AnArmSlowerPerCallThatHoldsLessIsAdoptedWhenTheStepIsShorter) {
  Learner learner(config(), std::make_shared<FootprintCatalog>());
  std::vector<uint16_t> last;
  // Per call "half" is 20% slower and "quarter" 40%; for the step "half" frees the compute beside
  // it (60 -> 20 µs a call) while "quarter" surfaces (80 µs): the descent stops at "half".
  const StateStats st = run_steps(learner, {{100, 60}, {120, 20}, {140, 80}}, 600, true, &last);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "half");
  EXPECT_EQ(st.trial.challenger, "quarter");
  EXPECT_EQ(st.trial.verdict.rfind("rejected", 0), 0u) << st.trial.verdict;
  EXPECT_TRUE(std::all_of(last.begin(), last.end(), [](uint16_t a) { return a == 1; }));
  // Its per-call excess over the default is not charged (the trial showed the step is shorter):
  // charged, it would be about 20 µs x 2,000 calls.
  EXPECT_GT(st.arms.at(1).samples, 1000u);
  EXPECT_LT(st.extra_us, 5000.0);
}

// FootprintCatalog with the priors of a model that prices holding less as slower per call (NCCL's
// prices a channel cap by the bandwidth it gives up, where the real call may be bandwidth bound).
class PricedFootprintCatalog : public FootprintCatalog {
 public:
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override {
    return arm == 0 ? 100 : 300;
  }
};

TEST(StepTrials, TheDescentStartsWhileArmsWokenLaterAreProbed) {
  // The prior prices "half" and "quarter" at 3x the default: a first probe waits until the state
  // has seen enough calls (gate (b)), which re-opens probing after the state first converged.
  // Measured, "half" is only 20% slower per call and shortens the step. The descent waits for its
  // first costs (it used to end at once, with no rung qualified by the prior: "half" was never
  // tried in 600 steps) and opens its trial while the woken arms are still probed per call.
  Learner learner(config(), std::make_shared<PricedFootprintCatalog>());
  const StateStats st = run_steps(learner, {{100, 60}, {120, 20}, {125, 80}}, 600, true);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "half");
  const auto adopted = std::find_if(st.events.begin(), st.events.end(), [](const StateEvent& e) {
    return e.what == "adopted: shorter steps";
  });
  ASSERT_NE(adopted, st.events.end());
  EXPECT_LT(adopted->step, 150u);
}

// A state's events say in which of the group's steps they happened, beside the state's call count:
// where a state makes several calls a step, the timeline a reader needs is in steps.
TEST(StepTrials, EventsCarryTheStepTheyHappenedIn) {
  Learner learner(config(), std::make_shared<PricedFootprintCatalog>());
  const StateStats st = run_steps(learner, {{100, 60}, {120, 20}, {125, 80}}, 600, true);
  ASSERT_GE(st.events.size(), 3u);
  for (const StateEvent& e : st.events) {
    // run_steps: kCallsPerStep calls, then the step's end; an event comes during a call.
    EXPECT_EQ(e.step, (e.call - 1) / kCallsPerStep) << e.what << " at call " << e.call;
  }
}

// Four arms holding what the default holds and, last, "half": the prior prices all but the default
// at 3x it, so every one waits for its first probe until the state has seen enough calls.
class RungBehindOtherArmsCatalog : public NamedArmsCatalog {
 public:
  RungBehindOtherArmsCatalog()
      : NamedArmsCatalog({"default", "alt1", "alt2", "alt3", "alt4", "half"}, [](Arm& a, int i) {
          a.action.algo = static_cast<int8_t>(i);
          if (i == 5) a.action.channels = 8;
        }) {}
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override {
    return arm == 0 ? 100 : 300;
  }
  double footprint(OpKind, uint16_t arm, uint64_t) const override { return arm == 5 ? 0.5 : 1; }
};

TEST(StepTrials, TheDescentsNextRungIsProbedBeforeArmsThatHoldAsMuch) {
  // Once the state has converged, the arms woken later are probed; the descent waits for the
  // first cost of its rung, "half", which is 20% slower per call and shortens the step. The
  // others are 30% slower and free nothing. The rung's probe comes first, so its trial opens
  // before they have spent the budget. (The DDP interference scenario's rung came behind arms
  // that could not win: 93% of the step oracle's headroom, 95% now.) Each job is run afresh up to
  // a given step.
  const std::vector<ArmTruth> truth = {{100, 60},  {130, 130}, {130, 130},
                                       {130, 130}, {130, 130}, {120, 20}};
  for (int steps = 1; steps <= 150; ++steps) {
    Learner learner(config(), std::make_shared<RungBehindOtherArmsCatalog>());
    const StateStats st = run_steps(learner, truth, steps, true);
    const bool opened = std::any_of(st.events.begin(), st.events.end(), [](const StateEvent& e) {
      return e.what == "footprint trial";
    });
    if (!opened) continue;
    std::printf("the footprint trial opened in step %d\n", steps);
    EXPECT_LE(steps, 80);  // 56: the rung's first probe comes before the other arms' probes
    for (int arm = 1; arm <= 4; ++arm) EXPECT_EQ(st.arms.at(arm).samples, 0u) << arm;
    return;
  }
  FAIL() << "no footprint trial in 150 steps";
}

// "half" and its per-call twin "twin" hold half of what the default holds, "quarter" a quarter;
// the prior prices "quarter" at 5x the default, so its first probe waits until the state has seen
// enough calls.
class TwinRungsCatalog : public NamedArmsCatalog {
 public:
  TwinRungsCatalog()
      : NamedArmsCatalog({"default", "half", "twin", "quarter"}, [](Arm& a, int i) {
          a.action.algo = static_cast<int8_t>(i);
          a.action.channels = static_cast<int16_t>(i == 3 ? 4 : 8);
        }) {}
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override {
    return arm == 3 ? 500 : 100;
  }
  double footprint(OpKind, uint16_t arm, uint64_t) const override {
    return arm == 0 ? 1 : arm == 3 ? 0.25 : 0.5;
  }
};

TEST(StepTrials, ARungParkedByAReopenStillGetsItsFirstProbe) {
  // The descent adopts "half"; per call "twin" is cheaper, so the state re-opens on it, which
  // parks every arm without a cost in the new regime: "quarter", the next rung, just woken for its
  // first probe. Parked, it never got one and the descent stalled for good (an LLM step in the
  // simulator: the quarter-channel rung). "quarter" shortens the step further.
  Learner learner(config(), std::make_shared<TwinRungsCatalog>());
  const StateStats st = run_steps(learner, {{100, 60}, {115, 30}, {100, 30}, {125, 5}}, 800, true);
  ASSERT_TRUE(std::any_of(st.events.begin(), st.events.end(), [](const StateEvent& e) {
    return e.what == "reopened: a challenger looks cheaper";
  }));
  EXPECT_EQ(st.arms.at(st.incumbent).name, "quarter");
}

TEST(StepTrials, StepVerdictsSurviveAWarmStart) {
  Learner first(config(), std::make_shared<FootprintCatalog>());
  run_steps(first, {{100, 60}, {120, 20}, {140, 80}}, 600, true);
  const PolicySnapshot snap = first.snapshot();
  ASSERT_EQ(snap.states.size(), 1u);
  const std::vector<ArmSnapshot>& arms = snap.states[0].arms;
  EXPECT_EQ(snap.states[0].incumbent, "half");
  EXPECT_TRUE(arms.at(0).step_rejected);  // the default, which "half" replaced
  EXPECT_TRUE(arms.at(1).step_adopted);
  EXPECT_TRUE(arms.at(2).step_rejected);
  // Restored, per call the default is cheaper, yet "half" stays: the steps decided.
  Learner warm(config(), std::make_shared<FootprintCatalog>());
  warm.restore(snap);
  const StateStats st = run_steps(warm, {{100, 60}, {120, 20}, {140, 80}}, 300, true);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "half");
  EXPECT_LT(st.arms.at(0).calls, 30u);  // no per-call re-checks of the default
}

TEST(StepTrials, AFootprintThatDoesNotShortenTheStepKeepsTheDefault) {
  Learner learner(config(), std::make_shared<FootprintCatalog>());
  // Holding less frees nothing here (no compute beside the calls): each arm costs the step what
  // it costs per call. One trial, then the descent ends.
  const StateStats st = run_steps(learner, {{100, 100}, {120, 120}, {140, 140}}, 600, true);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
  EXPECT_EQ(st.trial.challenger, "half");
  EXPECT_EQ(st.trial.verdict.rfind("rejected", 0), 0u) << st.trial.verdict;
  // The do-no-harm budget stops the trial after its first pair; opened again, it resumes that
  // pair, so the second can reject it. (Started afresh each time, it was opened six times, each
  // paying a longer challenger step, and rejected only when three pairs came before the budget
  // ran out again.)
  EXPECT_LE(std::count_if(st.events.begin(), st.events.end(),
                          [](const StateEvent& e) { return e.what == "footprint trial"; }),
            2);
}

// One overlapped state descending FootprintCatalog's rungs over `steps` marked steps: its stats.
StateStats descend(const std::vector<ArmTruth>& truth, int steps, uint32_t seed, Noise noise = {}) {
  Learner learner(config(), std::make_shared<FootprintCatalog>());
  return run_states(learner, truth, steps, true, nullptr, seed, nullptr, noise).at(0);
}

// How many trials of `arm` the state opened.
int footprint_trials_of(const StateStats& st, uint16_t arm) {
  return static_cast<int>(
      std::count_if(st.events.begin(), st.events.end(), [&](const StateEvent& e) {
        return e.what == "footprint trial" && e.to_arm == arm;
      }));
}

TEST(StepTrials, ARungThatShortensTheStepUnderTheMarginIsAdopted) {
  // As in the simulated LLM step, where bandwidth saturates at a quarter of the channels: "half"
  // costs what the default costs per call and shortens the step by 20 µs (0.38%, under the 0.5%
  // margin), confidently; "quarter" is 3x slower per call (no rung). (The default was kept.)
  const StateStats st = descend({{100, 60}, {100, 55}, {300, 0}}, 600, 7, Noise{0.02, 5.0});
  EXPECT_EQ(st.arms.at(st.incumbent).name, "half") << st.trial.verdict;
  EXPECT_EQ(st.trial.verdict, "adopted: shorter steps");
  EXPECT_NEAR(st.trial.mean_delta_us, -20, 6);
}

TEST(StepTrials, ARungThatShortensTheStepOnlyOnAverageLeadsToTheNext) {
  // "half" shortens the step by 4 µs, less than the 3 standard errors its first 16 pairs can tell
  // at 5 µs of noise a step: its trial ends without effect, its pairs' mean below zero. "quarter",
  // 15% slower per call, shortens the step by 80 µs. (The descent ended at "half": the default
  // kept.)
  const StateStats st = descend({{100, 60}, {100, 59}, {115, 40}}, 600, 7, Noise{0.02, 5.0});
  EXPECT_EQ(st.arms.at(st.incumbent).name, "quarter");
  EXPECT_TRUE(has_event(st, "no effect on the step, shorter on average: kept, next rung"));
  EXPECT_TRUE(has_event(st, "adopted: shorter steps"));
}

TEST(StepTrials, ARungWithoutEffectDoesNotLeadOnToARungSlowerPerCall) {
  // As above, but "quarter" is 20% slower per call, beyond a tie (kTieRatio): where the rung above
  // it showed nothing (at this seed its pairs' mean is not below zero), the descent ends, whatever
  // "quarter" would do for the step (in a defaults-right state a second rung's trial would only
  // cost).
  const StateStats st = descend({{100, 60}, {100, 60}, {120, 20}}, 600, 10);
  EXPECT_TRUE(has_event(st, "no effect on the step: kept"));
  EXPECT_EQ(footprint_trials_of(st, 2), 0);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
}

TEST(StepTrials, TheLastRungShorterOnlyOnAverageRunsOnOnceAndIsAdopted) {
  // "half" shortens the step clearly and is adopted. "quarter", the descent's last rung, ties with
  // it per call and shortens the step by 4 µs more, under what 16 pairs can tell at 5 µs of noise:
  // its trial ends at the futility look, shorter on average. Run on once, to twice the pairs and
  // without the futility look while its pairs show the step shorter, it is adopted. (It ended
  // there and the state kept "half": the simulated LLM step's 16 MiB buckets, whose quarter frees
  // 0.2% of the step.)
  const StateStats st = descend({{100, 60}, {100, 40}, {100, 39}}, 800, 1, Noise{0.02, 5.0});
  EXPECT_TRUE(has_event(st, "no effect on the step, shorter on average: kept, next rung"));
  EXPECT_EQ(footprint_trials_of(st, 2), 2);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "quarter") << st.trial.verdict;
  EXPECT_GT(st.trial.pairs, 16u);  // past the futility look (a third of max_trial_pairs)
}

// "default", its near tie "tie" (another algorithm, holding as much), and "half" (half of it).
class TieAndRungCatalog : public NamedArmsCatalog {
 public:
  TieAndRungCatalog() : NamedArmsCatalog({"default", "tie", "half"}, another_algorithm) {}
  double footprint(OpKind, uint16_t arm, uint64_t) const override { return arm == 2 ? 0.5 : 1.0; }
};

// Overlapped bucket states of one group, kCallsPerStep calls a step each, from the step their
// `from` first holds (checked before each step on the learner's stats).
struct Bucket {
  uint64_t bytes;
  std::vector<ArmTruth> truth;
  std::function<bool(const std::vector<StateStats>&)> from = [](const auto&) { return true; };
};

// Runs `steps` steps of `buckets`; `each_step` sees the stats before each step. Returns the
// stats by state id (the buckets' first-call order).
std::vector<StateStats> run_buckets(
    std::shared_ptr<const ArmCatalog> catalog, const std::vector<Bucket>& buckets, int steps,
    uint32_t seed, const std::function<void(const std::vector<StateStats>&)>& each_step = nullptr,
    const LearnerConfig& cfg = config()) {
  Learner learner(cfg, std::move(catalog));
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<bool> started(buckets.size(), false);
  for (int step = 0; step < steps; ++step) {
    const std::vector<StateStats> st = learner.stats();
    if (each_step) each_step(st);
    for (size_t b = 0; b < buckets.size(); ++b) started[b] = started[b] || buckets[b].from(st);
    RoundResult round;
    double step_us = kComputeUs;
    for (int c = 0; c < kCallsPerStep; ++c) {
      for (size_t b = 0; b < buckets.size(); ++b) {
        if (!started[b]) continue;
        const Decision d = learner.decide(overlapped_bucket(buckets[b].bytes));
        const ArmTruth& t = buckets[b].truth.at(d.arm);
        step_us += t.step_cost_us;
        if (d.measure) {
          const float cost = static_cast<float>(t.call_us * (1.0 + 0.003 * noise(rng)));
          round.calls.push_back({d.state_id, d.arm, cost, d.probe, d.after_probe});
        }
      }
    }
    learner.mark_step();
    learner.close_window();  // a round a step
    round.first_step = static_cast<uint64_t>(step);
    round.step_times_us = {step_us + 20.0 * noise(rng)};
    learner.apply_round(round);
  }
  return learner.stats();
}

bool trial_running(const std::vector<StateStats>& st, size_t id) {
  return st.size() > id && st[id].trial.verdict == "running";
}

// A Bucket's `from`: once state `id`'s trial runs.
std::function<bool(const std::vector<StateStats>&)> once_trial_runs(size_t id) {
  return [id](const std::vector<StateStats>& st) { return trial_running(st, id); };
}

// An `each_step` of run_buckets(): state 0's trial verdict at the first step state `id`'s trial
// runs, into `*verdict`.
std::function<void(const std::vector<StateStats>&)> verdict_of_0_when_trial_runs(
    size_t id, std::string* verdict) {
  return [id, verdict](const std::vector<StateStats>& st) {
    if (trial_running(st, id) && verdict->empty()) *verdict = st[0].trial.verdict;
  };
}

// In the simulated LLM step the 32 MiB buckets' rung waited 32 steps for the 16 MiB buckets'
// trial, which then waited 45 steps for it: the group's trials run two at once, on orthogonal
// step patterns (StepTrialBoard).
TEST(StepTrials, TwoStatesTrialsRunAtOnceAndEachIsJudgedByItsOwnEffect) {
  // A's "half" shortens the step by 4 x 30 us; B's (from the step A's trial runs) lengthens it by
  // 4 x 30 us. Each is 10% slower per call than its default; "quarter" is far slower.
  const std::vector<Bucket> buckets = {
      {1 << 20, {{100, 100}, {110, 70}, {300, 300}}},
      {4 << 20, {{100, 100}, {110, 130}, {300, 300}}, once_trial_runs(0)}};
  for (uint32_t seed : {3u, 5u, 7u}) {
    bool overlapped = false;
    const std::vector<StateStats> st = run_buckets(
        std::make_shared<FootprintCatalog>(), buckets, 600, seed,
        [&](const std::vector<StateStats>& s) {
          overlapped = overlapped || (trial_running(s, 0) && trial_running(s, 1));
        });
    ASSERT_EQ(st.size(), 2u);
    EXPECT_TRUE(overlapped) << seed;
    EXPECT_EQ(st[0].arms.at(st[0].incumbent).name, "half") << seed << " " << st[0].trial.verdict;
    EXPECT_EQ(st[1].arms.at(st[1].incumbent).name, "default") << seed << " " << st[1].trial.verdict;
    // Each verdict rests on its own state's effect, not on the other's: a pair of A's steps ran
    // one arm of B, and a pair of B's one arm of A.
    for (const auto& [s, effect] : {std::pair{&st[0], -120.0}, std::pair{&st[1], 120.0}}) {
      const auto v = std::find_if(s->events.rbegin(), s->events.rend(),
                                  [](const StateEvent& e) { return e.trial.pairs > 0; });
      ASSERT_NE(v, s->events.rend()) << seed;
      EXPECT_NEAR(v->trial.mean_delta_us, effect, 4 * v->trial.stderr_us + 10) << seed << v->what;
    }
  }
}

// Whichever steps the two trials open at, a pair of one lane's steps runs one arm of the other's.
TEST(StepTrials, EachLanesPairsRunOneArmOfTheOtherLane) {
  for (uint64_t first = 0; first < 4; ++first) {
    for (uint64_t second = first; second < first + 6; ++second) {
      for (int first_lane = 0; first_lane < kTrialLanes; ++first_lane) {
        StepTrialBoard board;
        board.step = first;
        board.open(first_lane, 0);
        board.step = second;
        board.open(1 - first_lane, 1);
        const TrialLane& a = board.lanes[0];
        const TrialLane& b = board.lanes[1];
        for (uint64_t s = std::max(a.start, b.start); s < second + 40; ++s) {
          if (!a.challenger_at(s) && a.challenger_at(s + a.lag)) {
            EXPECT_EQ(b.challenger_at(s), b.challenger_at(s + a.lag)) << first << " " << second;
          }
          if (!b.challenger_at(s) && b.challenger_at(s + b.lag)) {
            EXPECT_EQ(a.challenger_at(s), a.challenger_at(s + b.lag)) << first << " " << second;
          }
        }
      }
    }
  }
}

TEST(StepTrials, AnArmMuchSlowerPerCallIsNotTrialedForItsFootprint) {
  Learner learner(config(), std::make_shared<FootprintCatalog>());
  // "half" and "quarter" take twice and three times as long per call: beyond
  // kHopelessRatio, they would surface in the step whatever they free.
  const StateStats st = run_steps(learner, {{100, 60}, {200, 0}, {300, 0}}, 600, true);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
  EXPECT_TRUE(st.trial.verdict.empty()) << st.trial.verdict;
}

TEST(StepTrials, ATrialWhoseStateIsNoLongerCalledStopsAndFreesTheBoard) {
  LearnerConfig cfg = config();
  HeadConfig& head = cfg.heads[static_cast<int>(Role::kDataParallel)];
  head.max_trial_pairs = 200;  // no futility look before the state stops being called
  Learner learner(cfg, std::make_shared<TwoArmCatalog>());
  run_steps(learner, {{100, 10}, {50, 10}}, 60, true);  // opens a trial on "fast"
  ASSERT_EQ(learner.stats().at(0).trial.verdict, "running");
  // The state is not called any more; steps and rounds go on (another state's calls).
  CollectiveContext other;
  other.effective_bytes = 64;
  RoundResult empty;
  for (int step = 0; step < 4 * head.max_trial_pairs + 8; ++step) {
    learner.decide(other);
    learner.mark_step();
    learner.apply_round(empty);
  }
  EXPECT_EQ(learner.stats().at(0).trial.verdict, "stopped: too few steps with the state's calls");
}

// One overlapped state, a round a step: kCallsPerStep calls, each adding its arm's step cost;
// with `paired` the round carries the step's time for the trials (otherwise none arrives, as
// when every pair is left out). `loss`, when set, is every round's training loss.
class StepByStep {
 public:
  StepByStep(Learner& learner, std::vector<ArmTruth> truth)
      : learner_(learner), truth_(std::move(truth)) {}
  double loss = NAN;
  void run(int steps, bool paired) {
    for (int i = 0; i < steps; ++i) {
      RoundResult round;
      double step_us = kComputeUs;
      for (int c = 0; c < kCallsPerStep; ++c) {
        const Decision d = learner_.decide(overlapped_bucket(kBucketBytes));
        step_us += truth_.at(d.arm).step_cost_us;
        const double cost = truth_.at(d.arm).call_us * (1.0 + 0.02 * noise_(rng_));
        if (d.measure)
          round.calls.push_back(
              {d.state_id, d.arm, static_cast<float>(cost), d.probe, d.after_probe});
      }
      learner_.mark_step();
      learner_.close_window();
      step_us += 20.0 * noise_(rng_);
      round.first_step = step_++;
      if (paired) round.step_times_us = {step_us};
      round.loss = loss;
      learner_.apply_round(round);
    }
  }
  StateStats stats() const { return learner_.stats().at(0); }
  std::vector<std::string> events() const {
    std::vector<std::string> what;
    for (const StateEvent& e : stats().events) what.push_back(e.what);
    return what;
  }

 private:
  Learner& learner_;
  std::vector<ArmTruth> truth_;
  std::mt19937 rng_{3};
  std::normal_distribution<double> noise_{0.0, 1.0};
  uint64_t step_ = 0;
};

TEST(StepTrials, ATrialWhoseStateRunsButWhosePairsDoNotComeStopsWithoutAVerdictAndRunsAgain) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  // "fast" halves the call and what it adds to the step: a trial adopts it once pairs come.
  StepByStep job(learner, {{100, 100}, {50, 50}});
  for (int i = 0; i < 200 && (i == 0 || job.stats().trial.verdict != "running"); ++i) {
    job.run(1, true);
  }
  ASSERT_EQ(job.stats().trial.verdict, "running");
  const int max_pairs = HeadConfig{}.max_trial_pairs;
  job.run(4 * max_pairs + 8, false);
  EXPECT_EQ(job.stats().trial.verdict, "running");  // the state has not gone away
  job.run(12 * max_pairs, false);
  const std::vector<std::string> what = job.events();
  const auto stop = std::find(what.begin(), what.end(), "stopped: too few comparable steps");
  ASSERT_NE(stop, what.end());
  // No verdict on "fast": its trial opens again, and adopts it once pairs come.
  EXPECT_NE(std::find(stop, what.end(), "step trial"), what.end());
  job.run(200, true);
  EXPECT_EQ(job.stats().arms.at(job.stats().incumbent).name, "fast");
  EXPECT_EQ(job.stats().trial.verdict, "adopted: shorter steps");
}

TEST(StepTrials, AGuardFreezesAStateJudgedByStepOnAnArmOnlyATrialAdopted) {
  LearnerConfig cfg = config();
  cfg.loss_stall_rounds = 40;
  Learner learner(cfg, std::make_shared<TwoArmCatalog>());
  // "fast" halves the call but takes cores from the compute: each of its calls adds 2 ms to the
  // step. The loss does not improve, so the loss-stall guard fires while the state learns.
  StepByStep job(learner, {{100, 10}, {50, 2000}});
  job.loss = 1.0;
  job.run(200, true);
  const StateStats st = job.stats();
  const std::vector<std::string> what = job.events();
  ASSERT_NE(std::find(what.begin(), what.end(), "frozen by a guard"), what.end());
  ASSERT_LT(st.arms.at(1).center_us, 0.9 * st.arms.at(0).center_us);  // per call, it wins
  EXPECT_EQ(st.arms.at(st.incumbent).name, "default");
}

// The overlapped state and, once `last_from(learner)` holds, the exposed one: {overlapped,
// exposed} (the latter empty if it never ran).
std::pair<StateStats, StateStats> run_two_states(
    Learner& learner, const std::vector<ArmTruth>& bucket, const std::vector<double>& last_call,
    int steps, const std::function<bool(const Learner&)>& last_from) {
  const LastBucket last{last_call, last_from};
  const std::vector<StateStats> st = run_states(learner, bucket, steps, true, &last, 11);
  if (st.size() == 1) return {st[0], StateStats{}};
  return st[0].exposure == Exposure::kOverlapped ? std::make_pair(st[0], st[1])
                                                 : std::make_pair(st[1], st[0]);
}

bool always(const Learner&) { return true; }

// Found on a GPU (two ranks over NCCL's socket transport): one probe of an arm 40x slower than
// NCCL's model says (ring/LL at 25 MiB: 1.16 s) spent the group's budget, and landed in one step
// of a bucket's trial of an arm twice as fast; the trial was rejected and never tried again.
TEST(StepTrials, AnotherStatesProbeNeitherStopsNorSkewsATrialThatPaysBack) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  // The bucket: "fast" halves the call and shortens the step. The last bucket: "fast" is 1000x
  // slower (its one probe: 0.1 s).
  const auto [b, l] = run_two_states(learner, {{100, 60}, {50, 10}}, {100, 1e5}, 400, always);
  EXPECT_GE(l.arms.at(1).samples, 1u);  // the slow probe ran
  EXPECT_EQ(l.arms.at(l.incumbent).name, "default");
  EXPECT_EQ(b.arms.at(b.incumbent).name, "fast") << b.trial.verdict;
  EXPECT_EQ(b.trial.verdict, "adopted: shorter steps");
  // The pairs measured the bucket's own effect (4 calls x 50 µs), not the probe's 0.1 s.
  EXPECT_NEAR(b.trial.mean_delta_us, -200, 60);
}

// In the simulated LLM step a rung's pairs spread 217 µs against 65 µs between steps (a trace of
// its trials, benchmarks/sim/step_time.md), most of it pairs in one of whose steps another state
// probed an arm slower per call. An exposed call adds its cost to its step, so a pair is taken
// without what such probes' own calls added over their incumbent (StepTrialBoard::take_probe_cost).
TEST(StepTrials, APairIsTakenWithoutWhatAnotherStatesExposedProbesAddedToItsSteps) {
  constexpr uint32_t kSeeds = 10;
  LearnerConfig cfg = config();
  cfg.heads[static_cast<int>(Role::kDataParallel)].regret_budget = 1.0;  // probes flow
  int adopted = 0;
  std::vector<uint64_t> pairs;
  std::vector<double> means;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    Learner learner(cfg, std::make_shared<NamedArmsCatalog>(
                             std::initializer_list<const char*>{"default", "fast", "s1", "s2", "s3",
                                                                "s4", "s5"},
                             another_algorithm));
    // The bucket: "fast" shortens the step by 4 x 15 µs; the others are slow for it. The last
    // bucket, from the step the bucket's trial runs: five arms 1.5-3.5x slower, each probed.
    const LastBucket last{{200, 210, 300, 400, 500, 600, 700},
                          [](const Learner& l) { return trial_running(l.stats(), 0); }};
    const std::vector<StateStats> st = run_states(
        learner, {{100, 100}, {50, 85}, {300, 300}, {300, 300}, {300, 300}, {300, 300}, {300, 300}},
        400, true, &last, seed);
    ASSERT_EQ(st.size(), 2u);
    ASSERT_GE(st[1].probes, 5u);  // the slow arms were probed beside the trial
    adopted += st[0].trial.verdict == "adopted: shorter steps";
    pairs.push_back(st[0].trial.pairs);
    means.push_back(st[0].trial.mean_delta_us);
  }
  std::sort(pairs.begin(), pairs.end());
  std::sort(means.begin(), means.end());
  std::printf("adopted in %d of %u runs; pairs to the verdict: median %lu, most %lu\n", adopted,
              kSeeds, static_cast<unsigned long>(pairs[kSeeds / 2]),
              static_cast<unsigned long>(pairs.back()));
  // The pairs spread by the steps' own noise (20 µs): verdicts at the first looks, each on the
  // bucket's own effect. (Taken with the probes' calls: kept the default in 4 of 10.)
  EXPECT_EQ(adopted, static_cast<int>(kSeeds));
  EXPECT_LE(pairs[kSeeds / 2], 8u);
  EXPECT_NEAR(means[kSeeds / 2], -60, 20);
}

// A noisy machine's job: the bucket state with TwoArmCatalog's arms (`truth`), 1.5 ms of noise a
// step, and an exposed last bucket whose arms tie, so that it probes again and again. Returns
// the bucket state's stats.
StateStats noisy_bucket(const std::vector<ArmTruth>& truth, int steps, uint32_t seed) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  const LastBucket last{{200, 210}, always};
  const std::vector<StateStats> st = run_states(learner, truth, steps, true, &last, seed, nullptr,
                                                Noise{0.02, 1500});
  return st.at(0).exposure == Exposure::kOverlapped ? st[0] : st.at(1);
}

// An arm 2x faster per call shortened the main job's steps 30% (CPU, 4 ranks on 2 cores), and
// every pair of its trial's steps in which the last bucket probed was more than 10% apart: all
// were left out, and the trial took 50-95 steps for 7-25 pairs. Once a trial has its first pairs,
// a probed pair within reach of them counts (claim_probe_step splits the probes between the two
// kinds of step).
TEST(StepTrials, PairsBesideAnotherStatesProbesCountOnceTheTrialHasItsFirstPairs) {
  constexpr int kSeeds = 20;
  std::vector<uint64_t> calls_to_verdict;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    // "fast" shortens the step by 2.4 ms of ~7.4.
    const StateStats bucket = noisy_bucket({{100, 600}, {50, 0}}, 400, seed);
    ASSERT_EQ(bucket.trial.verdict, "adopted: shorter steps");
    uint64_t opened = 0, adopted = 0;
    for (const StateEvent& e : bucket.events) {
      if (e.what == "step trial" && opened == 0) opened = e.call;
      if (e.what == "adopted: shorter steps") adopted = e.call;
    }
    calls_to_verdict.push_back(adopted - opened);
  }
  std::sort(calls_to_verdict.begin(), calls_to_verdict.end());
  const uint64_t median = calls_to_verdict[kSeeds / 2];
  std::printf("calls from a trial's start to its verdict, median of %d: %lu\n", kSeeds,
              static_cast<unsigned long>(median));
  EXPECT_LE(median, 100u);  // 115 while probed pairs more than 10% apart were all left out
}

// The other side of counting probed pairs: an arm faster per call with no effect on the step,
// trialed beside the same probes and step noise, is adopted no more often than the trial's
// bound allows (about 5% over its looks).
TEST(StepTrials, PairsBesideAnotherStatesProbesDoNotAdoptAnArmWithoutEffect) {
  constexpr int kSeeds = 60;
  int adopted = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    const StateStats bucket = noisy_bucket({{100, 300}, {50, 300}}, 800, seed);
    adopted += bucket.arms.at(bucket.incumbent).name == "fast";
  }
  std::printf("an arm without effect adopted in %d of %d runs\n", adopted, kSeeds);
  EXPECT_LE(adopted, 4);  // 2 of 60, as before probed pairs counted
}

// Futility (kFutilityLook): on a noisy machine a trial of an arm without effect on the step ends
// at a third of max_trial_pairs about half the time instead of running them all (CPU, 4 ranks,
// DDP: ~220 calls of the bucket state each, while an arm with 30% shorter steps waited), and an
// arm with an effect the full trial can tell from the noise is still adopted.
TEST(StepTrials, AFutileTrialEndsEarlyAndAnEffectTheTrialCanTellIsStillAdopted) {
  constexpr int kSeeds = 40;
  std::vector<uint64_t> null_pairs;
  int adopted = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    for (const double fast_step_cost : {300.0, 0.0}) {
      // "fast" halves the call and, in the second job, shortens the step by 1.2 ms (4 calls x
      // 300 µs): the 48-pair trial's bound is about 0.95 ms.
      const StateStats bucket = noisy_bucket({{100, 300}, {50, fast_step_cost}}, 1200, seed);
      if (fast_step_cost == 0) {
        adopted += bucket.arms.at(bucket.incumbent).name == "fast";
      } else if (bucket.trial.verdict == "no effect on the step: kept") {
        null_pairs.push_back(bucket.trial.pairs);
      }
    }
  }
  std::sort(null_pairs.begin(), null_pairs.end());
  ASSERT_GE(null_pairs.size(), kSeeds * 3 / 4u);
  const uint64_t median = null_pairs[null_pairs.size() / 2];
  std::printf("trials without effect: %zu of %d ended so, after a median of %lu pairs; an arm "
              "with an effect adopted in %d of %d\n",
              null_pairs.size(), kSeeds, static_cast<unsigned long>(median), adopted, kSeeds);
  EXPECT_LE(median, static_cast<uint64_t>(HeadConfig{}.max_trial_pairs) / 2);
  EXPECT_GE(adopted, kSeeds * 3 / 4);
}

// Found over an emulated WAN (CPU, 4 ranks, DDP): while one bucket's trial alternated Gloo's
// default (its own threads) and tree (ours), the last bucket probed every other step, always in
// the default's steps, where our queue was empty: tree looked 3x faster than rd there, was
// adopted, and the step grew 1.4x.
TEST(StepTrials, ProbesBesideAnotherStatesTrialAreSplitBetweenItsTwoKindsOfStep) {
  // The bucket's trial of "fast" (no effect on the step: it runs until its futility look, at a
  // third of its pairs) spans the last bucket's whole search, which starts on either kind of step.
  LearnerConfig cfg = config();
  cfg.heads[static_cast<int>(Role::kDataParallel)].max_trial_pairs = 600;
  for (int offset = 0; offset < 2; ++offset) {
    Learner learner(cfg, std::make_shared<TwoArmCatalog>());
    int seen = 0;
    int beside_fast = 0, beside_default = 0;
    LastBucket last{{200, 170}, [&](const Learner& l) {
                      const std::vector<StateStats> st = l.stats();
                      return !st.empty() && st[0].trial.verdict == "running" && seen++ >= offset;
                    }};
    last.probes_beside_other_arm = &beside_fast;
    last.probes_beside_default = &beside_default;
    const std::vector<StateStats> st = run_states(learner, {{100, 0}, {50, 0}}, 300, true, &last,
                                                  11);
    ASSERT_EQ(st.at(0).trial.verdict, "running");
    EXPECT_GE(beside_fast + beside_default, 6) << offset;
    EXPECT_LE(std::abs(beside_fast - beside_default), 1) << beside_fast << " " << beside_default;
  }
}

TEST(StepTrials, AFootprintTrialStoppedByAnotherStatesSpendingIsTriedAgain) {
  // The bucket's descent trials "half" (slower per call, frees the compute: the step is shorter).
  // While it runs, the exposed state starts and probes "half", 200x slower there: the budget is
  // spent. The trial stops without a verdict and, once the budget allows, runs again and adopts.
  Learner learner(config(), std::make_shared<FootprintCatalog>());
  const auto footprint_trial_running = [](const Learner& l) {
    const std::vector<StateStats> st = l.stats();
    return !st.empty() && st[0].trial.verdict == "running" && st[0].trial.challenger == "half";
  };
  const auto [b, l] = run_two_states(learner, {{100, 60}, {120, 40}, {140, 80}}, {100, 2e4, 100},
                                     6000, footprint_trial_running);
  EXPECT_GE(l.arms.at(1).samples, 1u);
  bool stopped = false;
  for (const StateEvent& e : b.events) {
    stopped = stopped || e.what == "stopped: the do-no-harm budget is spent";
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(b.arms.at(b.incumbent).name, "half") << b.trial.verdict;
}

TEST(StepTrials, WithoutStepBoundariesTheCallsDurationDecides) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  const StateStats st = run_steps(learner, {{100, 10}, {50, 310}}, 400, false);
  EXPECT_EQ(st.arms.at(st.incumbent).name, "fast");
  EXPECT_TRUE(st.trial.verdict.empty());
}

TEST(StepTrials, ExposureAndFusionAreSeparateStates) {
  Learner learner(config(), std::make_shared<TwoArmCatalog>());
  CollectiveContext ctx;
  ctx.effective_bytes = 4096;
  const uint32_t exposed = learner.decide(ctx).state_id;
  ctx.exposure = Exposure::kOverlapped;
  const uint32_t overlapped = learner.decide(ctx).state_id;
  ctx.fused = true;
  const uint32_t fused = learner.decide(ctx).state_id;
  EXPECT_NE(exposed, overlapped);
  EXPECT_NE(overlapped, fused);
  ctx.exposure = static_cast<Exposure>(7);
  EXPECT_THROW(learner.decide(ctx), std::invalid_argument);
}

TEST(StepTrials, MaxTrialPairsBelowTrialPairsIsRefused) {
  LearnerConfig cfg = config();
  cfg.heads[0].trial_pairs = 10;
  cfg.heads[0].max_trial_pairs = 5;
  try {
    Learner learner(cfg, std::make_shared<TwoArmCatalog>());
    FAIL() << "accepted max_trial_pairs < trial_pairs";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_trial_pairs=5"), std::string::npos) << e.what();
  }
}

// The probes whose costs are awaited sit in a fixed ring (decide() allocates nothing): past its
// capacity the oldest are dropped, and a cost is matched to the oldest awaited probe of its state,
// passing over the older ones of other states, across the ring's wrap.
TEST(StepTrials, TheAwaitedProbesKeepTheNewestInDecisionOrder) {
  StepTrialBoard board;
  const uint32_t n = StepTrialBoard::kMaxProbesAwaited + 76;
  for (uint32_t state = 0; state < n; ++state) board.note_probe(state);
  EXPECT_EQ(board.probes_awaited, StepTrialBoard::kMaxProbesAwaited);
  board.take_probe_cost(75, 1.0);  // dropped: nothing is charged, nothing is left
  EXPECT_EQ(board.probe_extra_us, 0.0);
  EXPECT_EQ(board.probes_awaited, 0u);
  for (uint32_t state = 0; state < n; ++state) board.note_probe(state);
  board.take_probe_cost(76, 1.0);     // the oldest kept
  board.take_probe_cost(n - 1, 2.0);  // the newest, past all the others
  EXPECT_EQ(board.probe_extra_us, 3.0);
  EXPECT_EQ(board.probes_awaited, 0u);
}

}  // namespace
}  // namespace dynamiccl
