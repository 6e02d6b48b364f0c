// The step trials of a group's learner: which states' trials run (two lanes), which arm each runs
// in which step, and the ended steps and probes whose times and costs are still to arrive. The
// rules that open trials and judge their pairs are the states' (policy_trials.cpp); the Learner
// pairs the step times a round brings (Learner::Impl::take_step_times).
//
// Determinism: everything here counts steps (Learner::mark_step) and follows decisions; nothing
// reads a clock or this rank's own timings.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "policy/learner.h"
#include "policy/tuning.h"

namespace dynamiccl {

static_assert(kTrialLanes == 2, "the board's lanes run at lags 1 and 2 (StepTrialBoard())");

// How trials share the steps (docs/learner.md, "Step trials"). Up to kTrialLanes
// overlapped states run one at once, each on its own lane. From the step after it opens, a lane's
// state runs its incumbent and its challenger in blocks of `lag` steps, alternated: lane 0 every
// other step, lane 1 every other pair of steps. Each (incumbent, challenger) pair of steps `lag`
// apart, step times max over ranks, gives its state one paired difference. The lanes' patterns
// are orthogonal: a lane-0 pair (s, s+1) lies inside one of lane 1's blocks (the lanes' starts
// share a parity), and a lane-1 pair (s, s+2) spans steps in which lane 0 ran the same arm, so a
// pair's difference is its own state's. (In the simulated LLM step, by a trace of its rounds, with
// one lane the 32 MiB buckets' rung waited 32 steps for the 16 MiB buckets' trial, which then
// waited 45 steps for it.) `step` counts Learner::mark_step() calls: the same on every rank.
//
// A pair with a step in which some state probed, and steps more than kProbedPairTolerance apart,
// is left out while the trial has fewer than kMinRobustWindow pairs, and afterwards only when its
// difference also lies beyond kTrialZ standard deviations of the trial's pairs from their
// mean (PolicyState::keeps_probed_pair): a probe of a slow arm (over a second, seen on a GPU)
// lands in one step of a pair and would be taken for the challenger's doing, while probes of
// near-ties barely move a step. Probes beside trials are spread over their kinds of step
// (PolicyState::claim_probe_step), so the pairs they touch are no more the challenger's doing
// than the incumbent's. (An arm 2x faster per call shortened the main job's steps 30%, 4 ranks on
// 2 cores: every probed pair was more than 10% apart and left out, and its trial took 50-95 steps
// for 7-25 pairs.)
struct TrialLane {
  int32_t owner = -1;       // the state on trial; -1 none
  uint64_t lag = 1;         // steps from a pair's incumbent step to its challenger step
  uint64_t start = 0;       // the trial's first step
  uint64_t used_steps = 0;  // the trial's ended steps in which the owner ran
  bool used = false;        // the owner ran in the current step
  // Incumbent steps awaiting their challenger step, one per step of a block.
  struct Pending {
    double us = NAN;
    uint64_t step = 0;
    bool probed = false;
  };
  std::array<Pending, 2> pending;
  bool running_at(uint64_t s) const { return owner >= 0 && s >= start; }
  bool challenger_at(uint64_t s) const { return (((s - start) / lag) & 1) != 0; }
};
struct StepTrialBoard {
  uint64_t step = 0;    // the current step's number
  bool probed = false;  // some state probed in the current step
  // What the current step's exposed probes added to it, as their costs arrive (take_probe_cost).
  double probe_extra_us = 0;
  std::array<TrialLane, kTrialLanes> lanes;
  struct Mark {
    uint64_t step;
    std::array<bool, kTrialLanes> used;  // by lane: its owner ran in the step
    bool probed;
    double probe_extra_us;
  };
  std::deque<Mark> marks;  // the trials' ended steps whose times have not arrived
  // Probes whose costs have not arrived, in decision order: their step and state, in a fixed ring
  // (decide() allocates nothing). Costs come within two rounds
  // (RoundScheduler::kCostLatencyRounds); past kMaxProbesAwaited, the oldest is taken for one that
  // never will.
  struct Probe {
    uint64_t step;
    uint32_t state;
  };
  static constexpr size_t kMaxProbesAwaited = 1024;
  std::array<Probe, kMaxProbesAwaited> probes{};
  size_t probes_first = 0, probes_awaited = 0;
  void note_probe(uint32_t state) {
    probed = true;
    if (probes_awaited == kMaxProbesAwaited) pop_probe();
    probes[(probes_first + probes_awaited++) % kMaxProbesAwaited] = {step, state};
  }
  Probe pop_probe() {
    const Probe p = probes[probes_first];
    probes_first = (probes_first + 1) % kMaxProbesAwaited;
    --probes_awaited;
    return p;
  }
  // A probe's cost arrived (they arrive in decision order; one whose outcome never came is passed
  // over): what it added to its step, counted against the step's time in its trial pairs.
  void take_probe_cost(uint32_t state, double extra_us);
  StepSource source = StepSource::kMarked;
  StepTrialBoard() { lanes[1].lag = 2; }
  bool busy() const {
    for (const TrialLane& l : lanes) {
      if (l.owner >= 0) return true;
    }
    return false;
  }
  int free_lane() const {
    for (int i = 0; i < kTrialLanes; ++i) {
      if (lanes[i].owner < 0) return i;
    }
    return -1;
  }
  // `state`'s trial takes `lane` from the next step on, its start of the same parity as the other
  // running lane's (the patterns' orthogonality needs it).
  void open(int lane, int32_t state);
  void close(int lane) { lanes[lane].owner = -1; }
  // The current step ended (Learner::mark_step): the steps a running trial's state ran in are
  // kept until their times arrive, and the next step begins.
  void end_step();
};

}  // namespace dynamiccl
