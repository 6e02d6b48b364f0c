// The procedure per call (docs/learner.md, "The procedure, per call and per round"): the hot
// path of PolicyState, inline because Learner::decide runs it on every collective (no
// allocation; core_decide_bench measures it). Included by policy/policy_state.h only.
#pragma once

#include <cmath>

namespace dynamiccl {

// Candidates and the first probe gate.
// An arm whose prior cost is more than kPriorCutoff times the best prior of the state is not a
// candidate (at 100,000 ranks a ring arm is priced 1,500x NCCL's pick and really costs seconds
// per call), except that the kChallengers best arms by prior always are. The cut is wide
// because priors are models: the winners the simulator's library plants sit at up to 4x.
// Do no harm: a challenger gets a single probe until its first cost is back. Probes are committed
// on the prior's expectation, and a prior can be wrong (on a 2-core CPU host halving-doubling is
// priced cheapest and costs twice the default); the first cost lets the hopeless rule drop the arm
// before more probes are spent on it, so a wrong prior costs at most one probe per arm.
// A gated candidate whose cost is not back within RoundScheduler::kCostLatencyRounds stops
// waiting for it.

inline int PolicyState::choose(Mode mode, bool* probe, bool* measure) {
  *probe = false;
  *measure = false;
  ++calls_;
  if (mode == Mode::kOff) return default_slot_;
  if (mode == Mode::kFrozen || frozen_) return incumbent_;
  group_->budget_us += head_.regret_budget * ref_us_;
  if (trial_.challenger >= 0) return trial_call(measure);
  if (settled_) return watch(probe, measure);
  if (phase_ == LearnPhase::kWarmup) {
    if (calls_ <= warmup_calls_) {
      *measure = true;  // the default's cost: the baseline everything is judged against
      ++measured_calls_;
      return default_slot_;
    }
    begin_probing();  // depends on the call count only: the same call on every rank
  }
  if (phase_ == LearnPhase::kExploit && budget_ppm_ > converged_ppm_) {
    // Geometric decay of the exploration budget after convergence (see kConvergedDecayShift).
    const uint32_t step = (budget_ppm_ - converged_ppm_) >> kConvergedDecayShift;
    budget_ppm_ -= step > 0 ? step : 1;
  }
  if (!probe_credit_.earn(budget_ppm_)) return incumbent_call(measure);
  const int target = phase_ == LearnPhase::kProbing ? probe_target() : runner_up_;
  probes_flow_ = target >= 0 && affordable(slots_[target]);
  if (probes_flow_ && !claim_probe_step()) {
    probe_credit_.hold();  // the probe waits for a step of the other kind
    return incumbent_call(measure);
  }
  if (!probes_flow_) {
    // Nothing to probe now (costs in flight, no challenger, or not affordable yet): the credit
    // is not banked, so the search runs at most once per 1/budget calls and probes never come
    // back to back.
    probe_credit_.clear();
    return incumbent_call(measure);
  }
  probe_credit_.spend();
  ++probes_;
  *probe = true;
  *measure = true;
  ++measured_calls_;
  ArmSlot& t = slots_[target];
  const double commit_us = t.expected_extra_us;
  t.inflight_extra_us += commit_us;
  ++t.inflight_probes;
  group_->inflight_us += commit_us;
  return target;
}
inline int PolicyState::probe_target() {
  if (awaited_rung_ >= 0 && wants_first_probes(awaited_rung_)) return awaited_rung_;
  const int n = num_slots();
  const double first_price = next_first_probe_price();
  for (int k = 0; k < n; ++k) {
    int i = rr_cursor_ + k;
    if (i >= n) i -= n;
    if (!wants_first_probes(i) ||
        (on(Rule::kFirstProbes) && slots_[i].issued == 0 && priced_us(slots_[i]) > first_price))
      continue;
    rr_cursor_ = i + 1 == n ? 0 : i + 1;
    return i;
  }
  // Sharpening a challenger's interval is pointless until the incumbent has a reference
  // (after a re-open it may have none): its own calls come first.
  if (slots_[incumbent_].stats.count() < need_) return -1;
  return widest_target();
}
inline double PolicyState::next_first_probe_price() const {
  double best = INFINITY;
  for (int i = 0; i < num_slots(); ++i) {
    if (slots_[i].issued == 0 && wants_first_probes(i)) best = std::min(best, priced_us(slots_[i]));
  }
  return best;
}
inline bool PolicyState::wants_first_probes(int i) const {
  const ArmSlot& a = slots_[i];
  return i != incumbent_ && a.probeable() && a.issued < need_ && !awaiting(a) && worth_probing(a);
}
inline bool PolicyState::awaiting(const ArmSlot& a) const {
  return on(Rule::kFirstProbes) && a.gated && a.stats.count() == 0 && a.issued > 0;
}
inline bool PolicyState::affordable(const ArmSlot& a) const {
  return ref_us_ > 0 && (group_->allows(a.expected_extra_us) || repays(a));
}
inline bool PolicyState::repays(const ArmSlot& a) const {
  if (!on(Rule::kRepays) || a.view.n == 0 || a.step_rejected || (a.view.n == 1 && tail_ > 0) ||
      (per_call_misleads() && judged_by_step())) {
    return false;
  }
  const double half_width = a.view.n == 1 ? kConfidenceZ * slots_[default_slot_].view.spread
                                          : a.view.half_width;
  return a.view.center + half_width < ref_us_;
}
inline bool PolicyState::worth_probing(const ArmSlot& a) const { return !a.deferred; }
inline void PolicyState::begin_probing() {
  phase_ = LearnPhase::kProbing;
  for (ArmSlot& a : slots_) {
    a.deferred = on(Rule::kWorthProbing) && a.issued == 0 && a.stats.count() == 0 &&
                 calls_ < a.worth_from_call;
  }
}
inline int PolicyState::incumbent_call(bool* measure) {
  const bool compared = phase_ == LearnPhase::kProbing && probes_flow_ && group_->window_probed;
  if (!compared && slots_[incumbent_].view.n >= need_) {
    if (!learning_credit_.take(learning_ppm_)) return incumbent_;
  }
  *measure = true;
  ++measured_calls_;
  return incumbent_;
}
inline int PolicyState::watch(bool* probe, bool* measure) {
  if (!watch_credit_.take(watch_ppm_)) return incumbent_;
  *measure = true;
  ++measured_calls_;
  // An arm a step trial adopted was weighed against the default by the step, not per call.
  if (incumbent_ == default_slot_ || slots_[incumbent_].step_adopted) return incumbent_;
  if (!check_credit_.earn(check_ppm_)) return incumbent_;
  if (!claim_probe_step()) {
    check_credit_.hold();
    return incumbent_;
  }
  check_credit_.spend();
  *probe = true;  // the default's cost is the baseline itself: no extra to commit
  ++probes_;
  return default_slot_;
}
inline int PolicyState::trial_call(bool* measure) {
  *measure = true;
  ++measured_calls_;
  TrialLane& lane = trials_->lanes[lane_];
  if (trials_->step < lane.start) return incumbent_;
  lane.used = true;
  return lane.challenger_at(trials_->step) ? trial_.challenger : incumbent_;
}
inline bool PolicyState::claim_probe_step() {
  uint32_t kinds = 1, kind = 0;
  for (const TrialLane& l : trials_->lanes) {
    if (!l.running_at(trials_->step)) continue;
    kind += kinds * l.challenger_at(trials_->step);
    kinds *= 2;
  }
  if (kinds == 1 || !on(Rule::kProbeStepKinds)) return true;
  if (kind != trial_time_probes_ % kinds) return false;
  ++trial_time_probes_;
  return true;
}
inline bool PolicyState::judged_by_step() const {
  if (trials_->step == 0) return false;
  switch (trials_->source) {
    case StepSource::kMarked: return exposure_ == Exposure::kOverlapped;
    case StepSource::kRoundsJudged: return true;
    case StepSource::kRoundsIgnored: return false;
  }
  return false;
}
inline bool PolicyState::per_call_misleads() const {
  return trials_->source == StepSource::kRoundsJudged;
}

}  // namespace dynamiccl
