// What a state reports and keeps (its events, stats(), snapshot(), restore()), the guard's freeze
// and arms that can never run again: rare, off the hot path.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "policy/policy_state.h"

namespace dynamiccl {

void PolicyState::freeze() {
  refresh_views();
  if (trial_.challenger >= 0) end_trial("stopped: frozen by a guard", TrialEnd::kRejected);
  frozen_ = true;
  // A guard fires when the job's own step time or loss says learning hurts: keep an arm other
  // than the default only if it beats the default by the margin a switch needs. In a state
  // judged by step time, per call is not enough: only an arm a step trial adopted.
  int best = default_slot_;
  if (judged_by_step()) {
    if (slots_[incumbent_].step_adopted) best = incumbent_;
  } else {
    const int known = best_known();
    const double bar = slots_[default_slot_].view.center * (1.0 - head_.switch_margin);
    if (slots_[known].view.center < bar) best = known;
  }
  note("frozen by a guard", incumbent_, best);
  incumbent_ = best;
  runner_up_ = -1;
  focus_from_ = -1;
  cusum_.reset();
}

void PolicyState::restore(const StateSnapshot& snap, const std::vector<Arm>& arms) {
  for (ArmSlot& a : slots_) {
    const ArmSnapshot* found = nullptr;
    for (const ArmSnapshot& s : snap.arms) {
      if (s.name == arms[a.arm].name) {
        found = &s;
        break;
      }
    }
    a.clear_regime();
    a.parked = false;
    a.gated = a.arm != kDefaultArm;
    if (found != nullptr) {
      // No costs in the window: the restored mean stands for the centre until new costs arrive.
      a.stats.assign(found->samples, found->mean_us, found->m2);
      a.trimmed.assign(found->samples, found->mean_us, found->m2);
      a.eliminated = found->eliminated;
      a.step_adopted = found->step_adopted;
      a.step_rejected = found->step_rejected;
    }
    a.issued = static_cast<uint32_t>(std::min<uint64_t>(a.stats.count(), UINT32_MAX));
    a.refresh();
  }
  incumbent_ = default_slot_;
  for (int i = 0; i < num_slots(); ++i) {
    if (!slots_[i].unavailable && arms[slots_[i].arm].name == snap.incumbent) incumbent_ = i;
  }
  slots_[incumbent_].eliminated = false;
  // A warm start exploits at once: no warm-up, the converged budget, CUSUM against the restored
  // incumbent cost (a changed cluster then shows up as an alarm and re-opens probing).
  phase_ = LearnPhase::kExploit;
  converged_at_call_ = calls_;
  probes_to_converge_ = 0;
  unsettle();
  budget_ppm_ = converged_ppm_;
  rr_cursor_ = 0;
  focus_from_ = -1;
  cusum_.reset();
  runner_up_ = frozen_ ? -1 : pick_runner_up();  // frozen: the restored incumbent, nothing else
}

// Unavailable and parked arms are reported as eliminated: they are out of the competition (for
// good, or until the state re-opens).
StateStats PolicyState::stats(const std::vector<Arm>& arms) const {
  StateStats st;
  st.state_id = id_;
  st.role = role_;
  st.op = op_;
  st.size_bin = size_bin_;
  st.exposure = exposure_;
  st.fused = fused_;
  st.incumbent = slots_[incumbent_].arm;
  st.phase = frozen_                          ? "frozen"
             : phase_ == LearnPhase::kWarmup  ? "warmup"
             : phase_ == LearnPhase::kProbing ? "probing"
             : settled_                       ? "settled"
                                              : "exploit";
  st.calls = calls_;
  st.measured_calls = measured_calls_;
  st.extra_us = extra_us_;
  st.reference_us = ref_us_;
  st.budget_us = head_.regret_budget * ref_us_ * static_cast<double>(calls_);  // its share
  st.assumed_channels = assumed_channels_;
  st.nccl_channels = reported_channels_;
  st.events = events_;
  st.probes = probes_;
  st.probes_to_converge = probes_to_converge_.value_or(probes_);
  st.alarms = alarms_;
  st.frozen = frozen_;
  st.converged_at_call = converged_at_call_;
  for (size_t arm = 0; arm < slot_of_arm_.size(); ++arm) {  // arm index order
    if (slot_of_arm_[arm] < 0) continue;
    const ArmSlot& a = slots_[slot_of_arm_[arm]];
    ArmStats as;
    as.arm = static_cast<uint16_t>(arm);
    as.name = arms[arm].name;
    as.calls = a.calls;
    as.samples = a.samples;
    as.regime_samples = a.stats.count();
    as.mean_us = a.stats.mean();
    as.median_us = a.window.median_recent(a.window.size());
    as.center_us = a.view.center;
    as.prior_us = a.prior_us;
    as.prior_sigma = a.prior_sigma;
    as.eliminated = a.eliminated || a.unavailable || a.parked;
    st.arms.push_back(std::move(as));
  }
  if (*trial_.verdict) {
    static_cast<TrialEvidence&>(st.trial) = trial_.evidence();
    st.trial.challenger = arms[trial_.arm].name;
    st.trial.verdict = trial_.verdict;
  }
  return st;
}

StateSnapshot PolicyState::snapshot(const std::vector<Arm>& arms) const {
  StateSnapshot snap;
  snap.role = role_;
  snap.op = op_;
  snap.size_bin = size_bin_;
  snap.exposure = exposure_;
  snap.fused = fused_;
  snap.incumbent = arms[slots_[incumbent_].arm].name;
  snap.converged = frozen_ || phase_ == LearnPhase::kExploit;
  for (size_t arm = 0; arm < slot_of_arm_.size(); ++arm) {
    if (slot_of_arm_[arm] < 0) continue;
    const ArmSlot& a = slots_[slot_of_arm_[arm]];
    ArmSnapshot as;
    as.name = arms[arm].name;
    as.samples = a.stats.count();
    as.mean_us = a.stats.mean();
    as.m2 = a.stats.m2();
    as.analytic_us = std::isfinite(a.analytic_us) && a.analytic_us > 0 ? a.analytic_us : 0;
    as.eliminated = a.eliminated || a.unavailable || a.parked;
    as.step_adopted = a.step_adopted;
    as.step_rejected = a.step_rejected;
    snap.arms.push_back(std::move(as));
  }
  return snap;
}

void PolicyState::note(const char* what, int from_slot, int to_slot) {
  if (events_.size() == kMaxEvents) events_.erase(events_.begin());
  events_.push_back(
      StateEvent{calls_, trials_->step, what, slots_[from_slot].arm, slots_[to_slot].arm, {}});
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

void PolicyState::drop_arm(uint16_t arm) { drop_slot(slot_of(arm), "unavailable on some rank"); }

void PolicyState::drop_slot(int i, const char* why) {
  // The engine default is "let the engine choose": it cannot be unavailable.
  if (i < 0 || i == default_slot_) return;
  ArmSlot& a = slots_[i];
  a.unavailable = true;
  a.resolved = false;
  a.parked = false;
  if (runner_up_ == i) runner_up_ = -1;
  if (focus_from_ == i) focus_from_ = -1;
  if (trial_.challenger == i)
    end_trial((std::string("rejected: ") + why).c_str(), TrialEnd::kRejected);
  release_all(a);
  if (incumbent_ != i) return;
  // The best arm known in the current regime takes over (the default when none is known: a
  // focused re-open may have left it unmeasured).
  const int best = best_known();
  note((std::string("incumbent ") + why).c_str(), i, best);
  incumbent_ = best;
  slots_[incumbent_].eliminated = false;
  cusum_.reset();
  // A converged state lost its choice: probe again, keeping the statistics, so an arm already
  // known to be confidently cheaper takes over at the next round.
  if (!frozen_ && phase_ == LearnPhase::kExploit) {
    phase_ = LearnPhase::kProbing;
    budget_ppm_ = probe_ppm_;
    rr_cursor_ = 0;
    unsettle();
  }
}

void PolicyState::release_all(ArmSlot& a) {
  group_->inflight_us = std::max(0.0, group_->inflight_us - a.inflight_extra_us);
  a.inflight_extra_us = 0;
  a.inflight_probes = 0;
}

}  // namespace dynamiccl
