// Where one state's next probe goes, and whether it may run (docs/learner.md, "What a probe may
// cost"): first probes in the prior's order, one at a time until its first cost is back; then the
// undecided candidate with the widest interval; every probe within the do-no-harm budget unless
// the arm already repays it.
#include "policy/policy_state.h"

#include <algorithm>
#include <cmath>

namespace dynamiccl {

// Probing: round robin over candidates still short of need_ calls (a gated candidate waits
// for its first cost; those never probed take their first in the prior's order), then, once the
// incumbent has need_ costs, the undecided candidate with the widest
// confidence interval (costs in flight counted); -1 if none. The footprint descent's next rung,
// when it waits for its first cost, goes first: the descent is what shortens the step of an
// overlapped state (DDP interference scenario: behind arms that cannot win, the rung's probe came
// late, and the run captured 93% of the step oracle's headroom instead of 95%).
int PolicyState::probe_target() {
  if (on(Rule::kRungWaitsFirst) && awaited_rung_ >= 0 && wants_first_probes(awaited_rung_))
    return awaited_rung_;
  const int n = num_slots();
  const double first_price = next_first_probe_price();
  for (int k = 0; k < n; ++k) {
    int i = rr_cursor_ + k;
    if (i >= n) i -= n;
    if (!wants_first_probes(i) ||
        (on(Rule::kFirstProbeOrder) && slots_[i].issued == 0 && priced_us(slots_[i]) > first_price))
      continue;
    rr_cursor_ = i + 1 == n ? 0 : i + 1;
    return i;
  }
  // Sharpening a challenger's interval is pointless until the incumbent has a reference
  // (after a re-open it may have none): its own calls come first.
  if (slots_[incumbent_].stats.count() < need_) return -1;
  return widest_target();
}

// First probes go in the prior's order: of the candidates never probed, only those at the best
// price may be (+inf: none wants one). The budget decides when, not which: when each had its
// turn, a refund arriving between two turns let a worse arm in first (simulated socket
// transport: ring/LL, priced 1.9x and 20x in truth, before tree at 0.65x; its probe spent the
// group's budget and tree waited 70 calls).
double PolicyState::next_first_probe_price() const {
  double best = INFINITY;
  for (int i = 0; i < num_slots(); ++i) {
    if (slots_[i].issued == 0 && wants_first_probes(i)) best = std::min(best, priced_us(slots_[i]));
  }
  return best;
}

// A candidate short of need_ calls that may be probed now.
bool PolicyState::wants_first_probes(int i) const {
  const ArmSlot& a = slots_[i];
  return i != incumbent_ && a.probeable() && a.issued < need_ && !awaiting(a) && worth_probing(a);
}

// Do-no-harm gate (a) of learner.h: the probe's expected extra fits in the group's regret
// budget, or the probe repays it. Not before the state's default has a cost: there is nothing
// to measure the extra against yet.
bool PolicyState::affordable(const ArmSlot& a) const {
  return ref_us_ > 0 && (group_->allows(a.expected_extra_us) || repays(a));
}

// Confidently cheaper than the default (the upper bound of its centre; for a lone cost, with the
// default's spread, only while the state has shown no slow outlier: one could hit the next
// probe, and before three costs the ledger charges it in full), and, where the step judges, not
// found to lengthen it: a probe gives budget back (the ledger charges probes per call). Without
// this, one disastrous probe elsewhere (ring/LL over NCCL's socket transport: 18-51x the
// default) stops every state's probes for thousands of calls, a winning arm's too.
bool PolicyState::repays(const ArmSlot& a) const {
  if (!on(Rule::kRepays) || a.view.n == 0 || a.step_rejected || (a.view.n == 1 && tail_ > 0) ||
      (per_call_misleads() && judged_by_step())) {
    return false;
  }
  const double half_width = a.view.n == 1 ? kConfidenceZ * slots_[default_slot_].view.spread
                                          : a.view.half_width;
  return a.view.center + half_width < ref_us_;
}

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

}  // namespace dynamiccl
