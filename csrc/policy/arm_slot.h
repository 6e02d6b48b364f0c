// One candidate arm of a learner state: its costs in the current regime, and the robust view of
// them that comparisons read. Real collective costs are heavy-tailed (a preempted rank, a noisy
// neighbour on a shared host: an arm with a median of 129 us had a mean of 797 us), so arms are
// compared by a winsorized mean, not the raw mean; the raw Welford statistics stay for reporting
// and snapshots.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/types.h"
#include "policy/arm_stats.h"
#include "policy/tuning.h"

namespace dynamiccl {

// Confidence multiplier of the intervals used to eliminate, switch and re-check (~95% two-sided
// for a normal mean; the minimum sample count keeps the normal approximation reasonable).

// Costs beyond median +- kClipSpreads robust spreads (MAD-based, at least kMinRelSpread of the
// median, from the arm's recent window once it holds kMinRobustWindow costs) are clipped before
// they enter the centre an arm is compared by (a winsorized mean).
// A cost beyond kOutlierSpreads robust spreads above the median (once the window holds
// kMinRobustWindow costs) counts as an outlier: a heavy-tail event, about one normal cost in a
// billion. The state's rate of them sets how much evidence its decisions need.
// Once the window holds only part of a long regime, its order statistics (clip bounds, robust
// spread, worst recent cost) are recomputed every kSummaryEvery costs rather than every round.
constexpr uint32_t kSummaryEvery = 8;

// What the comparisons read about an arm, recomputed once per round when costs arrived.
struct ArmView {
  double center = 0;             // winsorized mean of the current regime
  double spread = 0;             // its standard deviation (floored at kMinRelSpread of the centre)
  double half_width = INFINITY;  // kConfidenceZ * spread / sqrt(n); +inf below two costs
  double robust_sigma = 0;       // MAD-based spread of the recent window (CUSUM, re-check)
  double highest_regular = INFINITY;  // worst non-outlier cost in the recent window (+inf: unknown)
  double clip_lo = -INFINITY;         // winsorizing bounds for the next costs
  double clip_hi = INFINITY;
  double outlier_hi = INFINITY;  // costs above it count as outliers
  uint64_t n = 0;                // costs the centre rests on
  // A cost as the centre takes it.
  double winsorized(double cost_us) const { return std::clamp(cost_us, clip_lo, clip_hi); }
};

// One candidate arm of a state.
struct ArmSlot {
  uint16_t arm = kDefaultArm;
  Action action;
  double prior_us = 0;       // what it was ordered by (the catalog's prior: learned or analytic)
  double analytic_us = 0;    // the engine's own prior (snapshots: what a learned prior corrects)
  double prior_sigma = NAN;  // how sure the prior is of prior_us (ArmPrior::sigma; NaN: unsaid)
  double footprint = 1.0;    // what it holds of the machine, relative to the default (catalog)
  RunningStats stats;        // raw costs of the current regime (reporting, snapshots)
  RunningStats trimmed;      // winsorized costs of the current regime (comparisons)
  SampleWindow window;       // most recent costs of the current regime
  ArmView view;
  double prev_center = INFINITY;  // centre before the last re-open (recovery ranking)
  float lowest = INFINITY;        // cheapest cost of the current regime
  uint32_t outliers = 0;          // regime costs above view.outlier_hi when they arrived
  uint32_t unsummarized = 0;      // costs since the window's order statistics were last taken
  uint64_t calls = 0;             // lifetime calls decided with this arm
  uint64_t samples = 0;           // lifetime costs received
  uint32_t issued = 0;            // calls decided in the current regime, costs in flight included
  uint32_t fresh = 0;             // costs received since the state last converged
  bool eliminated = false;        // confidently worse than the incumbent (or hopeless)
  bool resolved = false;          // nothing more to learn by probing it (recomputed every round)
  bool unavailable = false;       // dropped for good: the engine cannot run it for this state
  bool parked = false;            // left out of a focused re-probe after a re-open
  bool step_rejected = false;     // a step trial found it no better for the step (overlapped)
  bool step_adopted = false;      // a step trial found it shortens the step (overlapped)
  bool gated = false;             // a challenger: waits for its first cost before more probes
  bool dirty = false;             // costs arrived since the view was computed
  uint8_t waited = 0;             // rounds a gated probe's cost has been awaited
  // Do no harm (learner.h). From the prior, fixed: the expected extra cost of one probe and the
  // call count from which a first probe is worth it, both relative to the default's cost.
  double prior_extra_ratio = 0;
  uint64_t worth_from_call = 0;
  bool deferred = false;  // not worth a first probe yet (until the state has seen more calls)
  // Until its first cost, priced at prior_us x this: what the group's measured costs say of the
  // prior (arm_evidence.h); 1 when they say nothing.
  double evidence_factor = 1.0;
  // Refreshed every round: what one more probe's call is expected to cost over the default (µs),
  // and what this arm's probes whose costs are still in flight reserved.
  double expected_extra_us = 0;
  double inflight_extra_us = 0;
  uint32_t inflight_probes = 0;

  bool probeable() const { return !eliminated && !resolved && !unavailable && !parked; }

  // One cost into the current regime (lifetime counters are the caller's business).
  void add(float cost_us);
  // Recomputes the view: clip bounds from the recent window's median and MAD (see
  // kSummaryEvery), the winsorized centre and its confidence interval.
  void refresh();
  // A new regime: the statistics start over, not the lifetime counters nor the flags that
  // describe the arm's place in the state (unavailable, parked, gated).
  void clear_regime();
  // A new regime that already holds the `keep_recent` most recent costs (counted as issued).
  void restart_regime(int keep_recent);
};

}  // namespace dynamiccl
