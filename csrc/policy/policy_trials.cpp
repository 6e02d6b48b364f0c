// What a learner state does at step granularity (docs/learner.md, "Step trials"): which
// challenger an overlapped state trials against its incumbent (faster per call, a footprint rung
// of the descent, a near tie), and the verdict its paired step differences give. The group's
// board of running trials is step_trial_board.h.
//
// A converged overlapped state trials an arm that holds less than the incumbent's footprint
// (ArmCatalog::footprint): per call it may be slower, yet free what the compute beside
// it needs. Arms measured beyond kHopelessRatio x the incumbent per call (hopeless per call) are
// not tried: that much longer a call would surface in the step whatever it frees.
// A step trial adopts a challenger that shortens the step by more than kStepTrialMargin of it (with
// about 3 standard errors to spare): a smaller gain is not worth a switch from an arm chosen per
// call. A footprint rung is adopted when it shortens the step at all, as confidently: what it frees
// for the compute is what it is for, and a gain too small for the margin is still the step's. The
// simulated LLM step spreads 0.91% of headroom over two bucket states, and with the margin the
// 16 MiB one kept the default under every rung (benchmarks/sim/step_time.py --steps 1200: 80% of
// the headroom settled, 99% without the margin; --seeds 10: 36% over the run, 47% without).
#include "policy/policy_state.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dynamiccl {

// A trial is looked at every round, so its bound is wider than a single test's: about 3 standard
// errors keeps the chance that a neutral arm is judged either way over 40 looks near 5%. A verdict
// needs at least kMinRobustWindow pairs (the spread of fewer says little).
// A trial whose state runs in most steps stops without a verdict after this many steps per pair
// it needed (max_trial_pairs), if its pairs have not come.
// Futility: from this share of max_trial_pairs on, a trial whose pairs do not show the step
// shortened even by the margin (their mean, not a bound) ends as one without effect. A challenger
// that shortens the step by what max_trial_pairs can tell from noise rarely trends the wrong way
// by then, while a null one does half the time at each look. (CPU, 4 ranks, DDP: trials of arms
// faster per call without effect on the step ran their 48 pairs, ~220 calls of the bucket state,
// while rd, 30% shorter steps, waited.)
// A footprint rung that ends shorter on average and is the descent's last runs on, once, to this
// many times the pairs, without the futility look while its pairs show the step shorter.

// Faster per call (not a footprint trial) while holding no more of the machine, where per-call
// costs speak for the step.
bool PolicyState::pays_back(int challenger, TrialKind kind) const {
  return on(Rule::kTrialPaysBack) && kind == TrialKind::kFaster && !per_call_misleads() &&
         slots_[challenger].footprint <= slots_[incumbent_].footprint;
}

// A trial costs step time only if its challenger lengthens the step: one that pays back may run
// on a spent budget (its pairs repay it); the others wait for the budget.
bool PolicyState::may_open_trial(int challenger, TrialKind kind) const {
  return group_->allows(0) || pays_back(challenger, kind);
}

void PolicyState::retry_stopped_trial() {
  const int c = retry_challenger_;
  if (c < 0 || trial_.challenger >= 0 || free_lane() < 0) return;
  if (c == incumbent_ || slots_[c].step_rejected || slots_[c].unavailable) {
    retry_challenger_ = -1;
  } else if (may_open_trial(c, TrialKind::kFaster)) {
    retry_challenger_ = -1;
    open_trial(c, TrialKind::kFaster);
  }
}

// A trial stopped without a verdict (a spent budget, too few comparable steps) and opened again
// for the same two arms resumes its pairs: started afresh, a trial the budget stops after each
// first pair never reaches the second that could reject it (a footprint trial was opened six
// times in 600 steps, stopped after one pair but the last time, each paying a longer challenger
// step).
void PolicyState::open_trial(int challenger, TrialKind kind) {
  lane_ = free_lane();
  trials_->open(lane_, static_cast<int32_t>(id_));
  const bool resume = on(Rule::kTrialResume) && challenger == stopped_.challenger &&
                      incumbent_ == stopped_.incumbent && kind == trial_.kind;
  stopped_ = {};
  last_rung_ = -1;  // it runs on now, or another rung came first
  RunningStats deltas = trial_.deltas, incumbent_steps = trial_.incumbent_steps;
  trial_ = Trial{};
  if (resume) {
    trial_.deltas = deltas;
    trial_.incumbent_steps = incumbent_steps;
  }
  trial_.challenger = challenger;
  trial_.arm = slots_[challenger].arm;
  trial_.verdict = "running";
  trial_.kind = kind;
  note(kind == TrialKind::kFootprint ? "footprint trial" : "step trial", incumbent_, challenger);
}

// The descent: among the arms holding less than the incumbent's footprint, the one holding the
// most (the smallest step down; ties to the better prior, the slots' order).
// It continues from each adopted arm and below a rung that shortened the step only on average. A
// last rung shorter on average runs on once, to kLastRungPairsScale x the pairs. It ends at a
// trial that confidently shows the step longer, at an inconclusive one (TrialEnd::kInconclusive),
// or when no rung qualifies by its costs (nor may yet, by costs still to come). A rung waiting for
// its first cost is the state's next first probe (awaited_rung_).
void PolicyState::propose_footprint_trial() {
  awaited_rung_ = -1;
  if (footprint_done_ || trial_.challenger >= 0) return;
  const ArmSlot& inc = slots_[incumbent_];
  // Below the incumbent, and below the last rung trialed and not adopted (passed_rung_footprint_).
  const double ceiling = std::min(inc.footprint, passed_rung_footprint_);
  int best = -1;
  // A rung the prior rules out that has no cost yet (probed now, or woken later): its first
  // costs may qualify it, so the descent does not end on the prior's word.
  int awaited = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& c = slots_[i];
    if (i == incumbent_ || c.unavailable || c.step_rejected || !(c.footprint < ceiling)) {
      continue;
    }
    // Per call: its costs, or before its first the prior's ratio to the incumbent's.
    const double per_call = c.stats.count() > 0 ? c.view.center / inc.view.center
                                                : priced_us(c) / inc.prior_us;
    if (!(per_call <= kHopelessRatio)) {
      // Not one priced dearer by measured costs: that is evidence, not the prior's word.
      if (c.stats.count() == 0 && c.evidence_factor <= 1.0 &&
          (awaited < 0 || c.footprint > slots_[awaited].footprint)) {
        awaited = i;
      }
      continue;
    }
    if (best < 0 || c.footprint > slots_[best].footprint) best = i;
  }
  if (best < 0) {
    awaited_rung_ = awaited;
    // A focused re-open parks every arm without a cost in the new regime, the awaited rung too;
    // parked, it would never get the first probe it waits for and the descent would stall for
    // good (seen in the simulator on an LLM step: the quarter-channel rung of the data-parallel
    // buckets). The re-open ranked arms per call; the rung is the step's question.
    if (awaited >= 0) slots_[awaited].parked = false;
  }
  // With no rung below it, the last one whose trial ended shorter on average runs on, once.
  const bool run_on = best < 0 && awaited < 0 && last_rung_ >= 0 && !slots_[last_rung_].unavailable;
  if (run_on) best = last_rung_;
  const bool ready = best >= 0 && may_open_trial(best, TrialKind::kFootprint);
  if (free_lane() >= 0 && ready) {
    if (run_on) slots_[best].step_rejected = false;
    open_trial(best, TrialKind::kFootprint);
    trial_.extended = run_on;
    return;
  }
  if (!trials_->busy() && best < 0 && awaited < 0) footprint_done_ = true;
}

bool PolicyState::keeps_probed_pair(double incumbent_step_us, double challenger_step_us) const {
  const double delta_us = challenger_step_us - incumbent_step_us;
  if (std::fabs(delta_us) <=
      kProbedPairTolerance * std::min(incumbent_step_us, challenger_step_us)) {
    return true;
  }
  const RunningStats& d = trial_.deltas;
  return d.count() >= static_cast<uint64_t>(kMinRobustWindow) &&
         std::fabs(delta_us - d.mean()) <= kTrialZ * d.stddev();
}

void PolicyState::add_trial_pair(double incumbent_step_us, double challenger_step_us) {
  if (trial_.challenger < 0) return;
  const double delta_us = challenger_step_us - incumbent_step_us;
  trial_.deltas.add(delta_us);
  trial_.incumbent_steps.add(incumbent_step_us);
  extra_us_ += delta_us;  // do no harm, counted in step time
  group_->spent_us += delta_us;
}

double PolicyState::probe_step_extra_us(uint16_t arm, float cost_us) const {
  const int i = slot_of(arm);
  const ArmView& incumbent = slots_[incumbent_].view;
  if (exposure_ != Exposure::kExposed || i < 0 || incumbent.n == 0) return 0.0;
  return slots_[i].view.winsorized(cost_us) - incumbent.center;
}

// The verdict: adopted when the challenger confidently shortens the step by kStepTrialMargin of
// it (a footprint rung: by anything); rejected when it confidently lengthens it (on a spent budget,
// from the second pair on; otherwise from kMinRobustWindow on, by kTrialZ standard errors at every
// look); after max_trial_pairs without either,
// or once futile (kFutilityLook), no effect: the incumbent stays. On a spent budget a trial that
// does not pay back ends: rejected if its own pairs cost step time, otherwise stopped without a
// verdict (the budget went to other states' probes: it is tried again once it allows).
void PolicyState::evaluate_trial() {
  if (trial_.challenger < 0) return;
  const uint64_t pairs = trial_.deltas.count();
  if (!group_->allows(0)) {
    const bool costs = pairs >= 2 && trial_.deltas.mean() > 0;
    if (costs && trial_.deltas.mean() - kTrialZ * trial_.stderr_us() > 0) {
      return reject_for_longer_steps();
    }
    if (!pays_back(trial_.challenger, trial_.kind)) {
      return costs ? end_trial("rejected: the do-no-harm budget is spent", TrialEnd::kInconclusive)
                   : end_trial("stopped: the do-no-harm budget is spent", TrialEnd::kStopped);
    }
  }
  // A state that stopped being called in most steps would hold its lane of the board forever.
  // One called in most steps whose pairs were left out (probes elsewhere on a noisy machine) has
  // not shown anything against its challenger: it ends without a verdict, much later.
  const TrialLane& lane = trials_->lanes[lane_];
  const uint64_t steps = trials_->step > lane.start ? trials_->step - lane.start : 1;
  const uint64_t max_pairs = static_cast<uint64_t>(head_.max_trial_pairs) *
                             (trial_.extended ? kLastRungPairsScale : 1);
  if (pairs < max_pairs && steps > 4 * max_pairs) {
    if (2 * lane.used_steps < steps) {
      return end_trial("stopped: too few steps with the state's calls", TrialEnd::kRejected);
    }
    if (steps > kMaxTrialStepsPerPair * max_pairs) {
      return end_trial("stopped: too few comparable steps", TrialEnd::kStopped);
    }
  }
  const double wanted = head_.trial_pairs;
  if (pairs < std::min(static_cast<double>(kMinRobustWindow), wanted)) return;
  const double z = kTrialZ;
  const double mean = trial_.deltas.mean();
  const double se = trial_.stderr_us();
  const double margin = kStepTrialMargin * trial_.incumbent_steps.mean();
  // A footprint rung needs no margin (kStepTrialMargin).
  const double bar = trial_.kind == TrialKind::kFootprint ? 0.0 : margin;
  if (mean + z * se < -bar) return end_trial("adopted: shorter steps", TrialEnd::kAdopted);
  if (mean - z * se > 0) return reject_for_longer_steps();
  const bool futile = on(Rule::kFutility) && pairs >= kFutilityLook * head_.max_trial_pairs &&
                      mean > -margin && !(trial_.extended && mean < 0);
  if (!futile && pairs < max_pairs) return;
  // A rung whose pairs show the step shorter only on average says that freeing more may show it:
  // the descent goes on to the next rung. The simulated LLM step's 32 MiB buckets' half-channel
  // cap shortens the step by about the margin, so its trial ends either way by chance, and where
  // it ended without effect the descent stopped short of the quarter, which the state adopts
  // (benchmarks/sim/step_time.py --seeds 10, before this: 4% of the headroom over the run in one
  // seed of ten).
  if (trial_.kind == TrialKind::kFootprint && mean < 0) {
    return end_trial("no effect on the step, shorter on average: kept, next rung",
                     TrialEnd::kShorterOnAverage);
  }
  end_trial("no effect on the step: kept", TrialEnd::kInconclusive);
}

void PolicyState::reject_for_longer_steps() {
  end_trial("rejected: longer steps", TrialEnd::kRejected);
}

void PolicyState::end_trial(const char* verdict, TrialEnd end) {
  const int c = trial_.challenger;
  const bool adopt = end == TrialEnd::kAdopted;
  trial_.challenger = -1;
  trial_.verdict = verdict;
  trials_->close(lane_);
  lane_ = -1;
  note(verdict, incumbent_, adopt ? c : incumbent_);
  events_.back().trial = trial_.evidence();
  if (end == TrialEnd::kStopped) {
    stopped_ = {c, incumbent_};
    // The descent and the tie proposal run again by themselves.
    if (trial_.kind == TrialKind::kFaster) retry_challenger_ = c;
    return;
  }
  if (adopt) {
    slots_[incumbent_].step_rejected = true;  // the trial found it lengthens the step
    incumbent_ = c;
    passed_rung_footprint_ = std::numeric_limits<double>::infinity();
    last_rung_ = -1;
    slots_[c].eliminated = false;
    slots_[c].step_adopted = true;
    cusum_.reset();
    unsettle();
  } else {
    slots_[c].step_rejected = true;
    if (end == TrialEnd::kShorterOnAverage) {
      passed_rung_footprint_ = slots_[c].footprint;
      if (!trial_.extended) {
        last_rung_ = c;
        stopped_ = {c, incumbent_};  // its pairs go on if it runs again
      }
    } else if (trial_.kind == TrialKind::kFootprint) {
      footprint_done_ = true;
    }
  }
}

}  // namespace dynamiccl
