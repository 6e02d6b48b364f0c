// Early elimination (docs/learner.md, "The rules": hopeless, prior_resolves): when a challenger
// can be dropped, or stop being probed, before min_samples costs say it is confidently worse.
#include <cmath>
#include <cstdint>

#include "policy/policy_state.h"

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
  for (double p = q; p > kHopelessFalseRate && hopeless_need_ < need_; p *= q) {
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
      inc.view.n < kMinRobustWindow) {
    return false;
  }
  const double center = inc.view.center;
  if (!(center > 0) || c.lowest <= inc.view.highest_regular) return false;
  if (c.lowest > kHopelessRatio * center) return true;
  const double rel = inc.view.robust_sigma / center;
  return c.lowest * (1.0 - kConfidenceZ * rel) > center + inc.view.half_width;
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

}  // namespace dynamiccl
