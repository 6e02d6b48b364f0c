// One learner state, a (role, op, size bin) of a process group, and its life cycle: warm-up on
// the engine default, budgeted deterministic probing with elimination, exploitation with
// hysteresis, CUSUM re-opening (see learner.h for the contract). The Learner owns the table of
// states, the guards and the snapshots; everything that concerns a single state lives here.
//
// Determinism: every function below reads only the state itself, the head's budgets and the
// costs handed to fold(). Nothing reads a clock, a random source, or this rank's own timings.
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.h"
#include "policy/arm_catalog.h"
#include "policy/arm_stats.h"
#include "policy/cusum.h"
#include "policy/learner.h"

namespace dynamiccl {

// Confidence multiplier of the intervals used to eliminate, switch and re-check (~95% two-sided
// for a normal mean; the minimum sample count keeps the normal approximation reasonable).
constexpr double kConfidenceZ = 2.0;
// An undecided candidate is probed until it has this many times min_samples calls; after that
// the incumbent keeps its place (the tie cannot pay for more probing).
constexpr int kProbeCapFactor = 4;
// CUSUM watches the incumbent once its mean rests on this many costs.
constexpr uint64_t kCusumMinReference = 32;
// Budgets are kept in parts per million so the probe credit counter is exact integer arithmetic.
constexpr uint32_t kPpmOne = 1000000;

enum class LearnPhase : uint8_t { kWarmup, kProbing, kExploit };

// One candidate arm of a state.
struct ArmSlot {
  uint16_t arm = kDefaultArm;
  Action action;
  double prior_us = 0;
  RunningStats stats;     // costs of the current regime (cleared when probing re-opens)
  SampleWindow window;    // most recent costs, for the median view and the runner-up re-check
  double variance = 0;    // stats.variance() as of the last fold, read on the hot path
  uint64_t calls = 0;     // lifetime calls decided with this arm
  uint64_t samples = 0;   // lifetime costs received
  uint32_t issued = 0;    // calls decided in the current regime, costs in flight included
  uint32_t fresh = 0;     // costs received since the state last converged
  bool eliminated = false;  // confidently worse than the incumbent
  bool resolved = false;    // nothing more to learn by probing it (recomputed every round)
  bool unavailable = false; // dropped for good: the engine cannot run it for this state

  bool probeable() const { return !eliminated && !resolved && !unavailable; }
};

class PolicyState {
 public:
  // Candidates: the engine default plus the (max_candidates - 1) arms with the lowest prior cost
  // for this call's size and group, all kept in probe order (prior, then arm index).
  PolicyState(uint32_t id, Role role, OpKind op, int size_bin, const HeadConfig& head,
              const ArmCatalog& catalog, uint64_t effective_bytes, int group_size);

  // Hot path: picks the slot for the next call and counts it. No allocation.
  int choose(Mode mode, bool* probe) {
    *probe = false;
    ++calls_;
    if (mode == Mode::kOff) return default_slot_;
    if (mode == Mode::kFrozen || frozen_) return incumbent_;
    if (phase_ == LearnPhase::kWarmup) {
      if (calls_ <= warmup_calls_) return default_slot_;
      phase_ = LearnPhase::kProbing;  // depends on the call count only: the same call on every rank
    }
    if (phase_ == LearnPhase::kExploit && budget_ppm_ > converged_ppm_) {
      // Geometric decay (1/64 per call) of the exploration budget after convergence.
      const uint32_t step = (budget_ppm_ - converged_ppm_) >> 6;
      budget_ppm_ -= step > 0 ? step : 1;
    }
    credit_ppm_ += budget_ppm_;
    if (credit_ppm_ < kPpmOne) return incumbent_;
    const int target = phase_ == LearnPhase::kProbing ? probe_target() : runner_up_;
    if (target < 0) {
      // Nothing to probe now (costs in flight, or no challenger): the credit is not banked, so
      // the search runs at most once per 1/budget calls and probes never come in a burst.
      credit_ppm_ = 0;
      return incumbent_;
    }
    credit_ppm_ -= kPpmOne;
    ++probes_;
    *probe = true;
    return target;
  }

  // Folds one agreed cost. Returns true when it raised a CUSUM alarm (probing re-opened).
  // `learning` is false in frozen/off mode: statistics still accumulate, nothing changes.
  bool fold(uint16_t arm, float cost_us, bool learning);
  // Once per round after the costs: switch, eliminate, resolve, converge, re-check.
  void evaluate();
  // The arm can never run for this state again; an incumbent falls back to the default.
  void drop_arm(uint16_t arm);
  // Guard freeze: stop exploring, run the best known arm (default when none is known).
  void freeze();
  // Warm start from a snapshot of the same (role, op, size bin): exploit immediately.
  void restore(const StateSnapshot& snap, const std::vector<Arm>& arms);

  StateStats stats(const std::vector<Arm>& arms) const;
  StateSnapshot snapshot(const std::vector<Arm>& arms) const;

  uint32_t id() const { return id_; }
  Role role() const { return role_; }
  OpKind op() const { return op_; }
  int size_bin() const { return size_bin_; }
  LearnPhase phase() const { return phase_; }
  bool frozen() const { return frozen_; }
  bool converged() const { return phase_ == LearnPhase::kExploit; }
  int incumbent_slot() const { return incumbent_; }
  int default_slot() const { return default_slot_; }
  ArmSlot& slot(int i) { return slots_[i]; }
  const ArmSlot& slot(int i) const { return slots_[i]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  // Slot of `arm`, or -1 when it is not a candidate of this state.
  int slot_of(uint16_t arm) const {
    return arm < slot_of_arm_.size() ? slot_of_arm_[arm] : -1;
  }

 private:
  // Probing: round robin over candidates still short of min_samples calls, then the undecided
  // candidate with the widest confidence interval (costs in flight counted), -1 if none.
  int probe_target();
  void converge();
  void reopen();
  int pick_runner_up() const;
  int best_known() const;

  uint32_t id_;
  Role role_;
  OpKind op_;
  int size_bin_;
  HeadConfig head_;
  uint64_t warmup_calls_;
  uint32_t probe_ppm_;
  uint32_t converged_ppm_;

  std::vector<ArmSlot> slots_;         // probe order
  std::vector<int16_t> slot_of_arm_;   // catalog arm index -> slot, -1 if not a candidate
  int default_slot_ = 0;
  int incumbent_ = 0;
  int runner_up_ = -1;                 // exploit: the arm re-checked now and then
  int rr_cursor_ = 0;
  LearnPhase phase_ = LearnPhase::kWarmup;
  bool frozen_ = false;
  uint32_t budget_ppm_ = 0;            // current probing fraction
  uint32_t credit_ppm_ = 0;            // accumulated probe credit
  uint64_t calls_ = 0;
  uint64_t probes_ = 0;
  uint32_t alarms_ = 0;
  uint64_t converged_at_call_ = 0;
  Cusum cusum_;
};

}  // namespace dynamiccl
