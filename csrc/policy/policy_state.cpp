// A state's costs folded in and the round's evaluation (docs/learner.md, "The procedure, per call
// and per round"): switch to a confidently cheaper challenger, eliminate and resolve the others,
// converge; once converged, re-check the runner-up and the default, wake deferred arms, settle.
// "Resolved" (a challenger cannot beat the incumbent by the switch margin) is one-sided
// (kResolveZ) and only stops probing; an undecided near-tie stops after kProbeCapFactor x
// min_samples probes. After convergence the probing budget decays towards converged_budget by
// 1/2^kConvergedDecayShift a call: about two runner-up re-checks at the bulk heads' budget.
#include "policy/policy_state.h"

#include "policy/round_scheduler.h"

#include <algorithm>
#include <cmath>

namespace dynamiccl {

namespace {

// sqrt(pi/2), rounded: a normal sample's median has this many times its mean's standard error.
// The runner-up re-check and the rollback check bound a median of recent costs with it.
constexpr double kMedianSeRatio = 1.2533;

// CUSUM spread: the standard deviation of the incumbent's winsorized costs over the regime
// (stable, unlike a MAD of a short window, and bounded by the winsorizing under heavy tails), but
// never below the switch margin (at least 1%) of its centre. Without the floor a near-noiseless
// cost would alarm on shifts far too small to change which arm is best.
double cusum_sigma(const ArmView& v, double switch_margin) {
  const double floor = std::max(switch_margin, 0.01) * std::fabs(v.center);
  return std::max({v.spread, floor, 1e-9});
}

}  // namespace

// Every live candidate has its need_ calls. Probe the one whose confidence interval will
// still be widest once its costs in flight arrive: variance / issued, compared by
// cross-multiplication (no division on the hot path). Candidates whose costs have not arrived yet
// (fewer than two samples) are waited for, not probed again.
int PolicyState::widest_target() const {
  const uint32_t cap = probe_cap();
  const auto variance = [this](int i) { return slots_[i].view.spread * slots_[i].view.spread; };
  int best = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || !a.probeable() || a.stats.count() < 2 || a.issued >= cap) continue;
    if (best < 0 || variance(i) * slots_[best].issued > variance(best) * a.issued) best = i;
  }
  return best;
}

void PolicyState::release_probe(uint16_t arm) {
  const int i = slot_of(arm);
  if (i < 0) return;
  ArmSlot& a = slots_[i];
  if (a.inflight_probes == 0) return;
  const double committed = a.inflight_extra_us / a.inflight_probes;
  a.inflight_extra_us -= committed;
  --a.inflight_probes;
  group_->inflight_us = std::max(0.0, group_->inflight_us - committed);
}

bool PolicyState::fold(uint16_t arm, float cost_us, bool probe, bool learning) {
  const int i = slot_of(arm);
  if (i < 0) return false;
  if (probe) release_probe(arm);  // its expected extra becomes the realized one below
  ArmSlot& a = slots_[i];
  if (a.unavailable) return false;  // whatever ran in its place says nothing about the arm
  // Extra over the default: the cost winsorized as the arm's centre sees it, against the default's
  // centre (a slow outlier, which hits whatever arm runs, is not charged to the arm).
  // A trial's challenger is charged by the step time it costs (add_trial_pair), not per call.
  // An arm adopted by a step trial shortens the step: its per-call excess is not a cost.
  if (i != default_slot_ && ref_us_ > 0 && i != trial_.challenger) {
    double extra = a.view.winsorized(cost_us) - ref_us_;
    if (a.step_adopted && on(Rule::kStepAdoptedFree)) extra = std::min(extra, 0.0);
    extra_us_ += extra;
    group_->spent_us += extra;  // savings (negative) count as credit
  }
  // The CUSUM residual is predictive: the cost against the incumbent's view as of the last round,
  // so a shift within this round's costs cannot pull its own reference along. It watches once the
  // centre rests on a full window of costs, the window its spread and clip bounds come from.
  const bool watch = learning && !frozen_ && phase_ == LearnPhase::kExploit && i == incumbent_ &&
                     a.view.n >= static_cast<uint64_t>(SampleWindow::kCapacity);
  a.add(cost_us);
  ++a.samples;
  ++a.fresh;
  if (!watch) return false;
  const Cusum::Alarm alarm = cusum_.add(cost_us, a.view.center,
                                        cusum_sigma(a.view, head_.switch_margin), 1.0);
  if (alarm == Cusum::Alarm::kNone) return false;
  ++alarms_;
  // The costs since the CUSUM sum last left zero, and the two its filter held back: the new
  // regime's costs of the incumbent, which judge a provisional switch after a rise.
  const int keep = static_cast<int>(
      std::min<uint32_t>(cusum_.run() + 2, static_cast<uint32_t>(SampleWindow::kCapacity)));
  reopen_focused(-1, keep, alarm == Cusum::Alarm::kUp);
  return true;
}

// Comparisons use the winsorized centre of the current regime with a normal confidence interval:
// it tracks what a call costs on average, without letting a few outliers (a preempted rank, which
// hits any arm) decide between arms. The raw mean and the median serve reporting.
//
// Reward view: reward = -cost. The two penalties, for switching and for probing
// (docs/learner.md, "One state, one picture"), enter as constraints rather than as terms
// added to the cost:
//   - switching: a challenger takes over only if its expected reward beats the incumbent's by
//     switch_margin * incumbent cost, confidently (its upper bound below the incumbent's lower
//     bound). The margin is the price a switch has to pay back (hysteresis);
//   - probing: probe calls are capped by the head's budget (a credit counter), an arm that cannot
//     win (hopeless after as little as one cost, or confidently worse) is not probed again, and an
//     undecided near-tie stops being probed after kProbeCapFactor * min_samples calls, because
//     the reward it could still win is below the margin while each probe may cost.
void PolicyState::refresh_views() {
  for (ArmSlot& a : slots_) {
    if (a.dirty) a.refresh();
  }
}

void PolicyState::evaluate(const MeasureCost& measure) {
  refresh_views();  // also in warm-up and frozen: the views are what stats() reports
  exchange_evidence();
  update_measure_rates(measure);
  update_budget_view();
  if (frozen_ || phase_ == LearnPhase::kWarmup) return;
  evaluate_trial();
  update_tail();
  const double keep = 1.0 - head_.switch_margin;  // a challenger wins below keep x the incumbent
  if (phase_ == LearnPhase::kProbing) {
    evaluate_probing(keep);
  } else {
    evaluate_exploit(keep);
  }
  retry_stopped_trial();
  // Once converged, the descent also runs while arms woken later are probed per call: it need
  // not wait for all of them (40 steps of the DDP interference scenario's 400 did).
  if (converged_at_call_ > 0 && judged_by_step() && on(Rule::kFootprintDescent)) {
    propose_footprint_trial();
  }
  runner_up_ = phase_ == LearnPhase::kExploit ? pick_runner_up() : -1;
}

// What measuring costs, from the last round: the fraction of calls whose measuring costs
// `overhead` of the state's time (a round each while sparse; all of them once a round per K
// calls fits), before and after settling, and a probe's share of a round.
void PolicyState::update_measure_rates(const MeasureCost& measure) {
  const double center = slots_[incumbent_].view.center;
  auto fraction = [&](double overhead) -> uint32_t {
    if (!(measure.round_us > 0) || !(center > 0)) return kPpmOne;
    const double f = overhead * center / measure.round_us;
    return f * measure.round_calls >= 1.0 ? kPpmOne : to_ppm(std::max(f, kMinWatchFraction));
  };
  watch_ppm_ = fraction(kWatchOverhead);
  learning_ppm_ = fraction(kLearningOverhead);
  measure_ = measure;
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
    if (m < inc.view.center * keep_for(i, keep) && m + c.view.half_width < inc_lcb &&
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
    if (awaiting(c) && ++c.waited > RoundScheduler::kCostLatencyRounds) c.gated = false;
    // Resolved: confidently worse, or confidently unable to beat the incumbent by the margin,
    // or probed up to the cap without a verdict, or parked by a focused re-open, or not worth a
    // first probe yet (deferred: woken once the state has lived long enough).
    const double c_lower = c.view.center - c.view.half_width * (kResolveZ / kConfidenceZ);
    c.resolved = c.eliminated || c.parked || c.deferred || c.issued >= cap ||
                 (ready && c_lower >= inc_center * keep_for(i, keep)) || cannot_win_by_prior(c);
    all_resolved = all_resolved && c.resolved;
  }
  return all_resolved;
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
  if (fresh_enough(r, inc) &&
      fresh_median_ucb(r, inc) < inc.view.center * keep_for(runner_up_, keep)) {
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
// measure it again) say it is now confidently cheaper: back to the default (no margin: see
// keep_for()).
void PolicyState::rollback_if_default_cheaper() {
  // Per call the default may be cheaper: a step trial weighed that already (watch()).
  if (incumbent_ == default_slot_ || slots_[incumbent_].step_adopted) return;
  const ArmSlot& def = slots_[default_slot_];
  const ArmSlot& inc = slots_[incumbent_];
  if (!fresh_enough(def, inc)) return;
  const double ucb = fresh_median_ucb(def, inc);
  if (!(ucb < inc.view.center)) {
    // The incumbent holds: check less often (a fresh set of the default's costs next time).
    slots_[default_slot_].fresh = 0;
    check_ppm_ = std::max(to_ppm(kMinWatchFraction), check_ppm_ / 2);
    return;
  }
  note("rollback: the default is now cheaper", incumbent_, default_slot_);
  incumbent_ = default_slot_;
  cusum_.reset();
  for (ArmSlot& a : slots_) a.fresh = 0;
  unsettle();
}

// An arm left out because a first probe was not worth it (gate (b)) becomes worth it once the
// state has seen enough calls: probing re-opens for it, within the budget. Not one that a
// confident prior says cannot win.
void PolicyState::wake_deferred() {
  bool woke = false;
  for (ArmSlot& a : slots_) {
    if (!a.deferred || a.unavailable || calls_ < a.worth_from_call || cannot_win_by_prior(a)) {
      continue;
    }
    a.deferred = false;
    a.resolved = false;
    woke = true;
  }
  if (!woke) return;
  note("probing arms now worth a first probe", incumbent_, incumbent_);
  phase_ = LearnPhase::kProbing;
  budget_ppm_ = probe_ppm_;
  rr_cursor_ = 0;
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

}  // namespace dynamiccl
