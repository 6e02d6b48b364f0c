// The learner's pacing and its do-no-harm budget: the integer credit counters that pace probes,
// measurements and checks by call counts alone (so every rank takes the same calls), what
// measuring costs the job, and the group's regret budget its states share (learner.h).
#pragma once

#include <algorithm>
#include <cstdint>

namespace dynamiccl {

// Budgets are kept in parts per million so the credit counters are exact integer arithmetic.
constexpr uint32_t kPpmOne = 1000000;

// A fraction as parts per million, floored so that the integer budget never exceeds it.
inline uint32_t to_ppm(double fraction) {
  return static_cast<uint32_t>(std::clamp(fraction, 0.0, 1.0) * kPpmOne);
}

// Paces a fraction of calls: each call earns `rate_ppm`, and a whole call's worth (kPpmOne) buys
// one. Integer, and counted in calls only, so every rank takes the same calls.
struct CallCredit {
  uint32_t ppm = 0;
  // Earns one call's share; true when a whole call's worth is held (not yet spent).
  bool earn(uint32_t rate_ppm) {
    ppm += rate_ppm;
    return ppm >= kPpmOne;
  }
  void spend() { ppm -= kPpmOne; }
  // Earns and, when a whole call's worth is held, spends it.
  bool take(uint32_t rate_ppm) {
    if (!earn(rate_ppm)) return false;
    spend();
    return true;
  }
  // The earned call waits for a later one without being banked twice.
  void hold() { ppm = kPpmOne; }
  void clear() { ppm = 0; }
};

// Measuring costs the job consensus rounds (MeasureCost): a state that measures sparsely pays a
// round per measured call, one that measures densely a K-th of one. Outside warm-up, a state
// measures its incumbent's every call only while probes flow, and where rounds cost something only
// in the round windows that carry a probe (the probes of a round pay its price between them, and
// a round without probes is paid by the calls it measured); otherwise only as often as keeps that
// cost within kLearningOverhead of its time (kWatchOverhead once settled), and at least
// kMinWatchFraction of them (so that the CUSUM still sees a change); calls that cost far more than
// a round are all measured. Of the measured calls of a settled non-default incumbent, the head's
// converged_budget fraction run the default instead (the rollback check), a fraction that halves
// every time the check confirms the incumbent.
//
// What measuring costs the job, as the last consensus round reported it (RoundResult).
struct MeasureCost {
  double round_us = 0;  // one round; 0 = unknown (measuring is free)
  int round_calls = 1;  // measured calls one round can carry
};

// The do-no-harm budget of a group's learner, pooled over its states (learner.h): what learning
// cost over the default (savings count as credit), what probes in flight are expected to cost,
// and what it may cost: every call adds regret_budget x its state's default cost.
struct RegretBudget {
  double spent_us = 0;
  double inflight_us = 0;
  double budget_us = 0;
  // The current round window (RoundScheduler: K learned calls) carries a probe: its round will
  // run, so the incumbent's calls measured beside the probes bring no round of their own. Set by
  // Learner::decide on a probe, cleared at every boundary (Learner::close_window).
  bool window_probed = false;
  bool allows(double more_us) const { return spent_us + inflight_us + more_us <= budget_us; }
};

}  // namespace dynamiccl
