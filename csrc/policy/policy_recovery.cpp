// What a learner state does after a change: a focused re-open (the best few arms re-probed, the
// rest parked).
#include "policy/policy_state.h"

#include <algorithm>
#include <cmath>

namespace dynamiccl {

static_assert(kChallengers >= 1, "the incumbent and a challenger are always re-probed");

// Re-open exploration after a change (a CUSUM alarm on the incumbent, `slower` when its cost went
// up, or a runner-up that became confidently cheaper: `challenger`, always re-probed). The costs
// measured before it describe another regime, so every arm starts over; after a rise, the
// incumbent's `keep_incumbent` most recent costs (those the alarm found to belong to the new
// regime) are kept to judge a provisional switch, and stay only if it loses its place. Rather
// than re-learning from scratch, the incumbent and its kChallengers best rivals by their last known
// centre are re-probed; the rest are parked. The incumbent keeps its place until a
// challenger confidently beats it, except after a large shift (below).
void PolicyState::reopen_focused(int challenger, int keep_incumbent, bool slower) {
  const int from = incumbent_;
  unsettle();
  for (ArmSlot& a : slots_) {
    a.prev_center = !a.unavailable && a.view.n > 0 ? a.view.center : INFINITY;
  }
  // Focus set: the incumbent, the challenger, then the best others by previous centre.
  const int max_focus = on(Rule::kFocusedReopen) ? 1 + kChallengers : num_slots();
  std::vector<int> focus(static_cast<size_t>(std::max(max_focus, 2)));
  int n_focus = 0;
  const auto in_focus = [&](int i) {
    for (int k = 0; k < n_focus; ++k) {
      if (focus[k] == i) return true;
    }
    return false;
  };
  focus[n_focus++] = from;
  if (challenger >= 0 && challenger != from) focus[n_focus++] = challenger;
  while (n_focus < max_focus) {
    int best = -1;
    for (int i = 0; i < num_slots(); ++i) {
      const ArmSlot& a = slots_[i];
      if (a.unavailable || !std::isfinite(a.prev_center) || in_focus(i)) continue;
      if (best < 0 || a.prev_center < slots_[best].prev_center) best = i;
    }
    if (best < 0) break;
    focus[n_focus++] = best;
  }
  for (int i = 0; i < num_slots(); ++i) {
    ArmSlot& a = slots_[i];
    // The incumbent's last costs only serve to judge a provisional switch (below).
    if (i == from && slower) {
      a.restart_regime(keep_incumbent);
    } else {
      a.clear_regime();
    }
    const bool focused = !on(Rule::kFocusedReopen) || in_focus(i);
    a.parked = !focused && !a.unavailable;
    a.gated = !focused && a.arm != kDefaultArm;
    // A focused arm is re-probed now, whatever gate (b) said of a first probe: a challenger that
    // left deferred would be resolved at once and the state would re-converge without it, only
    // for its next re-check to re-open again (a loop that never switched to a 35% cheaper arm).
    if (focused) a.deferred = false;
  }
  // Provisional switch: after a large rise of the incumbent's cost, seen in every cost that
  // raised the alarm (noise, even a run of outliers, leaves some of them low), the best other
  // focused arm takes over at once if it was cheaper than what the incumbent costs now. Arms
  // that cost the same as the incumbent before (within the margin) are passed over: most likely
  // the same configuration under another name (NCCL's own pick among the explicit arms), hit by
  // the same change.
  const ArmSlot& now = slots_[from];
  const double margin = head_.switch_margin;
  if (on(Rule::kProvisionalSwitch) && slower && now.view.n > 0 &&
      now.lowest > now.prev_center * (1.0 + kProvisionalShift)) {
    int best = -1;
    for (int k = 1; k < n_focus; ++k) {
      const double p = slots_[focus[k]].prev_center;
      if (std::fabs(p - now.prev_center) <= margin * now.prev_center) continue;
      if (best < 0 || p < slots_[best].prev_center) best = focus[k];
    }
    if (best >= 0 && slots_[best].prev_center < now.view.center * (1.0 - margin)) {
      incumbent_ = best;
    }
  }
  // Otherwise the costs that raised the alarm were selected for being high (or low): kept, they
  // would misstate the incumbent. It measures itself afresh.
  if (incumbent_ == from) slots_[from].clear_regime();
  note(challenger >= 0 ? "reopened: a challenger looks cheaper"
       : slower        ? "reopened: the incumbent got slower"
                       : "reopened: the incumbent got cheaper",
       from, incumbent_);
  focus_from_ = from;
  phase_ = LearnPhase::kProbing;
  budget_ppm_ = probe_ppm_;
  rr_cursor_ = 0;
  runner_up_ = -1;
  cusum_.reset();
}

}  // namespace dynamiccl
