// The arm race of one state (docs/learner.md, "The procedure"): per round, switch to a challenger
// that confidently wins by the margin (or ask the step, for a state the step judges), eliminate
// the losers (at once when hopeless), resolve near-ties at the probe cap, converge; once
// converged, re-check the runner-up, roll back to a default that became confidently cheaper,
// and settle.
#include "policy/policy_state.h"

#include <algorithm>
#include <cmath>

namespace dynamiccl {

// The state's outlier rate, pooled over its arms (slow calls hit whatever arm runs), and what it
// implies: the costs an early elimination rests on, so that all of them being outliers is less
// likely than kHopelessFalseRate (one cost while no outlier has been seen, three at 10%).
void PolicyState::update_tail() {
  uint64_t outliers = 0, n_all = 0;
  for (const ArmSlot& a : slots_) {
    if (a.unavailable) continue;
    outliers += a.outliers;
    n_all += a.view.n;
  }
  const double q = n_all > 0 ? static_cast<double>(outliers) / static_cast<double>(n_all) : 0.0;
  tail_ = q;
  hopeless_need_ = 1;
  for (double p = q; p > kHopelessFalseRate && hopeless_need_ < kMaxHopelessNeed; p *= q) {
    ++hopeless_need_;
  }
}

// Early elimination, from a challenger's cheapest cost so far (a pessimistic view of it: its
// centre can only be higher). It must lie above every recent regular (non-outlier) cost of the
// incumbent, and rest on enough costs that all of them being outliers is unlikely (update_tail):
// the tail of the noise, which hits every arm, must not eliminate a good arm, and must not keep a
// bad one alive either (the incumbent's own outliers are left out of the bound for that). Then the
// challenger is hopeless when that cost exceeds kHopelessRatio x the incumbent's centre, or when,
// with the state's own noise level (the incumbent's relative robust spread) as its uncertainty, it
// is confidently above the incumbent's upper bound: successive elimination without waiting for
// min_samples costs.
bool PolicyState::hopeless(const ArmSlot& c, const ArmSlot& inc) const {
  // Costs seen, not counts restored from a snapshot: `lowest` knows only the former.
  if (!on(Rule::kHopeless) || static_cast<uint32_t>(c.window.size()) < hopeless_need_ ||
      inc.view.n < kHopelessMinReference) {
    return false;
  }
  const double center = inc.view.center;
  if (!(center > 0) || c.lowest <= inc.view.highest_regular) return false;
  if (c.lowest > kHopelessRatio * center) return true;
  const double rel = inc.view.robust_sigma / center;
  return c.lowest * (1.0 - kConfidenceZ * rel) > center + inc.view.half_width;
}

// A probing round: switch to a confidently cheaper challenger, eliminate and resolve the others,
// and converge once all are resolved.
void PolicyState::evaluate_probing(double keep) {
  const bool inc_ready = slots_[incumbent_].stats.count() >= need_;
  if (inc_ready) switch_to_cheapest(keep);
  const bool all_resolved = resolve_challengers(inc_ready, keep);
  if (all_resolved && inc_ready) {
    converge();
  }
}

// The cheapest challenger that confidently beats the incumbent by the margin (its upper bound
// below the incumbent's lower bound) takes over, if there is one.
void PolicyState::switch_to_cheapest(double keep) {
  const ArmSlot& inc = slots_[incumbent_];
  const double inc_lcb = inc.view.center - inc.view.half_width;
  int best = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& c = slots_[i];
    if (i == incumbent_ || c.unavailable || c.step_rejected || c.stats.count() < need_) {
      continue;
    }
    const double m = c.view.center;
    if (m < inc.view.center * keep && m + c.view.half_width < inc_lcb &&
        (best < 0 || m < slots_[best].view.center)) {
      best = i;
    }
  }
  const bool by_step = judged_by_step() && on(Rule::kStepTrials);
  if (best < 0) return;
  if (by_step) {
    // Faster on its own is not enough when compute runs beside the call: the step decides.
    if (trial_.challenger < 0 && free_lane() >= 0 && may_open_trial(best, TrialKind::kFaster)) {
      open_trial(best, TrialKind::kFaster);
    }
    return;
  }
  adopt_per_call(best);
}

void PolicyState::adopt_per_call(int challenger) {
  incumbent_ = challenger;
  slots_[challenger].eliminated = false;
}

// Where the step judges, per-call confidence is not the verdict, only the reason to ask the step.
// Eliminates the challengers that are hopeless or confidently worse, and marks which are
// resolved; true when all are.
bool PolicyState::resolve_challengers(bool inc_ready, double keep) {
  const ArmSlot& inc = slots_[incumbent_];
  const double inc_center = inc.view.center;
  const double inc_ucb = inc_center + inc.view.half_width;
  const uint32_t cap = probe_cap();
  bool all_resolved = true;
  for (int i = 0; i < num_slots(); ++i) {
    ArmSlot& c = slots_[i];
    c.resolved = false;
    if (i == incumbent_ || c.unavailable) continue;
    if (hopeless(c, inc)) c.eliminated = true;
    const bool ready = inc_ready && c.stats.count() >= need_;
    const double c_lcb = c.view.center - c.view.half_width;
    if (ready && c_lcb > inc_ucb) c.eliminated = true;
    // A gated probe whose cost never comes (an engine that could not time it) is not waited
    // for forever.
    if (awaiting(c) && ++c.waited > kMaxWaitRounds) c.gated = false;
    // Resolved: confidently worse, or confidently unable to beat the incumbent by the margin,
    // or probed up to the cap without a verdict, or parked by a focused re-open, or not worth a
    // first probe yet (deferred: woken once the state has lived long enough).
    const double c_lower = c.view.center - c.view.half_width * (kResolveZ / kConfidenceZ);
    c.resolved = c.eliminated || c.parked || c.deferred || c.issued >= cap ||
                 (ready && c_lower >= inc_center * keep) || cannot_win_by_prior(c);
    all_resolved = all_resolved && c.resolved;
  }
  return all_resolved;
}

// A prior that states its confidence (a learned one) stands in for repeat probes: the arm's log
// cost ratio to the incumbent is estimated from the prior (its ratio to the default's, the two
// sigmas combined) and, once the incumbent has its costs, from the arm's costs so far (the
// incumbent's relative spread per cost until the arm has two of its own), each weighted by its
// precision. The arm cannot win once even the optimistic end of that estimate (kResolveZ) does
// not beat the incumbent by the margin: a twin of the default that the model has seen tie in
// every past job needs no probe, or a few instead of kProbeCapFactor x min_samples. This only
// stops probing: eliminations and switches rest on costs alone, so a wrong prior can miss a gain,
// never put a slower arm in place.
bool PolicyState::cannot_win_by_prior(const ArmSlot& c) const {
  if (!on(Rule::kPriorResolves)) return false;
  const ArmSlot& inc = slots_[incumbent_];
  const double prior_var = c.prior_sigma * c.prior_sigma + inc.prior_sigma * inc.prior_sigma;
  const double prior_ratio = priced_us(c) / inc.prior_us;
  // Priced by measured costs (arm_evidence.h) at kHopelessRatio x the incumbent or more:
  // resolved, as one cost that far above would eliminate it.
  if (c.evidence_factor > 1.0 && prior_ratio >= kHopelessRatio) return true;
  if (!(prior_var > 0) || !std::isfinite(prior_var) || !(prior_ratio > 0) ||
      !std::isfinite(prior_ratio)) {
    return false;
  }
  double precision = 1.0 / prior_var;
  double weighted = std::log(prior_ratio) * precision;
  if (inc.stats.count() >= need_ && c.view.n > 0 && c.view.center > 0 && inc.view.center > 0) {
    const double rel_inc = inc.view.spread / inc.view.center;
    const double rel_c = c.view.n >= 2 ? c.view.spread / c.view.center : rel_inc;
    const double var = rel_c * rel_c / static_cast<double>(c.view.n) +
                       rel_inc * rel_inc / static_cast<double>(inc.view.n);
    precision += 1.0 / var;
    weighted += std::log(c.view.center / inc.view.center) / var;
  }
  return weighted / precision - kResolveZ / std::sqrt(precision) >=
         std::log(1.0 - head_.switch_margin);
}

// An exploiting round: re-check the runner-up and the default, wake deferred arms, and settle
// once the state has been quiet for settle_calls.
void PolicyState::evaluate_exploit(double keep) {
  recheck_runner_up(keep);
  if (phase_ == LearnPhase::kExploit) rollback_if_default_cheaper();
  if (phase_ == LearnPhase::kExploit) wake_deferred();
  if (phase_ == LearnPhase::kExploit && !settled_ &&
      calls_ >= quiet_since_ + static_cast<uint64_t>(head_.settle_calls)) {
    settle();
  }
}

// Runner-up re-check: its recent costs (received since convergence) against the incumbent.
// Only a confident gain beyond the margin re-opens probing, so a near-equal runner-up does not
// make the state flap.
void PolicyState::recheck_runner_up(double keep) {
  if (runner_up_ < 0) return;
  ArmSlot& r = slots_[runner_up_];
  const ArmSlot& inc = slots_[incumbent_];
  // Re-probe afresh: the runner-up's costs since convergence may straddle the change.
  if (fresh_enough(r, inc) && fresh_median_ucb(r, inc) < inc.view.center * keep) {
    reopen_focused(runner_up_, 0, false);
  }
}

// `a` has costs enough since convergence (need_, at most a window) to be re-checked against
// the incumbent, which has need_ of its own.
bool PolicyState::fresh_enough(const ArmSlot& a, const ArmSlot& inc) const {
  const uint32_t need = std::min<uint32_t>(need_, static_cast<uint32_t>(SampleWindow::kCapacity));
  return a.fresh >= need && inc.stats.count() >= need_;
}

// Upper confidence bound of the median of `a`'s costs since convergence (at most a window), with
// a spread no smaller than the incumbent's robust one.
double PolicyState::fresh_median_ucb(const ArmSlot& a, const ArmSlot& inc) const {
  const int k = static_cast<int>(std::min<uint32_t>(a.fresh, SampleWindow::kCapacity));
  const RobustSummary rs = a.window.summary_recent(k);
  const double sd = std::max(kMadToSigma * rs.mad, inc.view.robust_sigma);
  return rs.median + kConfidenceZ * kMedianSeRatio * sd / std::sqrt(k);
}

void PolicyState::converge() {
  note("converged", focus_from_ >= 0 ? focus_from_ : incumbent_, incumbent_);
  phase_ = LearnPhase::kExploit;
  converged_at_call_ = calls_;
  if (!probes_to_converge_) probes_to_converge_ = probes_;
  quiet_since_ = calls_;
  for (ArmSlot& a : slots_) a.fresh = 0;
  cusum_.reset();
  focus_from_ = -1;
}

void PolicyState::update_budget_view() {
  const ArmSlot& def = slots_[default_slot_];
  if (def.view.n > 0) ref_us_ = def.view.center;  // else the last known one
  for (ArmSlot& a : slots_) {
    const double expected = a.view.n > 0 ? a.view.center : (1.0 + a.prior_extra_ratio) * ref_us_;
    a.expected_extra_us = a.arm == kDefaultArm ? 0.0 : std::max(0.0, expected - ref_us_);
  }
}

// The incumbent is not the default, and the default's costs since convergence (watch windows
// measure it again) say it is now confidently cheaper by the margin: back to the default.
void PolicyState::rollback_if_default_cheaper() {
  // Per call the default may be cheaper: a step trial weighed that already (watch()).
  if (incumbent_ == default_slot_ || slots_[incumbent_].step_adopted) return;
  const ArmSlot& def = slots_[default_slot_];
  const ArmSlot& inc = slots_[incumbent_];
  if (!fresh_enough(def, inc)) return;
  const double ucb = fresh_median_ucb(def, inc);
  if (!(ucb < inc.view.center * (1.0 - head_.switch_margin))) {
    // The incumbent holds: check less often (a fresh set of the default's costs next time).
    slots_[default_slot_].fresh = 0;
    check_ppm_ = std::max(kMinCheckPpm, check_ppm_ / 2);
    return;
  }
  note("rollback: the default is now cheaper", incumbent_, default_slot_);
  incumbent_ = default_slot_;
  cusum_.reset();
  for (ArmSlot& a : slots_) a.fresh = 0;
  unsettle();
}

void PolicyState::settle() {
  settled_ = true;
  watch_credit_.clear();
  check_ppm_ = converged_ppm_;
  note("settled", incumbent_, incumbent_);
}

void PolicyState::unsettle() {
  settled_ = false;
  quiet_since_ = calls_;
}

void PolicyState::note(const char* what, int from_slot, int to_slot) {
  if (events_.size() == kMaxEvents) events_.erase(events_.begin());
  events_.push_back(
      StateEvent{calls_, trials_->step, what, slots_[from_slot].arm, slots_[to_slot].arm, {}});
}

// The best available non-incumbent arm by centre (eliminated ones included: the re-check is how an
// arm that became cheaper gets a second chance); before any costs, the next one by prior.
int PolicyState::pick_runner_up() const {
  int best = -1;
  int first = -1;
  // An arm a step trial rejected is not re-checked per call: it was weighed.
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || a.unavailable || a.parked || a.step_rejected) {
      continue;
    }
    if (a.stats.count() == 0) {
      // Not one that cannot win by its price (the prior's, or measured costs' through
      // arm_evidence.h): re-checked, it would pay the first probe probing declined.
      if (first < 0 && !cannot_win_by_prior(a)) first = i;
      continue;
    }
    if (first < 0) first = i;
    if (best < 0 || a.view.center < slots_[best].view.center) best = i;
  }
  return best >= 0 ? best : first;
}

// Lowest centre among available arms with enough costs; the default when none has them.
int PolicyState::best_known() const {
  // An arm beats the engine default only on evidence from the same regime: when the default has
  // no costs since the last re-open, it is the safe answer.
  const ArmSlot& def = slots_[default_slot_];
  if (def.stats.count() < need_) return default_slot_;
  int best = default_slot_;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (a.unavailable || a.stats.count() < need_) continue;
    if (a.view.center < slots_[best].view.center) best = i;
  }
  return best;
}
}  // namespace dynamiccl
