// What consensus hands a learner, for the core tests that drive one through calls and steps: the
// measured calls of each round of kRoundCalls calls, with the step times ended since the last
// round (backend/consensus.h does this for the real backend).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "policy/learner.h"

namespace dynamiccl {

constexpr int kRoundCalls = 16;  // K, DYNAMICCL_ROUND_CALLS' default

struct RoundFeed {
  RoundResult round;          // the measured calls of the round so far
  std::vector<double> ended;  // step times since the last round
  uint64_t first_step = 0;    // the number of the first of them
  uint64_t calls = 0;

  void measured(const Decision& d, float cost_us, uint16_t channels = 0) {
    round.calls.push_back({d.state_id, d.arm, cost_us, d.probe, d.after_probe, channels});
  }
  // After every call: each kRoundCalls-th hands the round to the learner. True when it did.
  bool end_call(Learner& learner) {
    if (++calls % kRoundCalls != 0) return false;
    round.first_step = first_step;
    round.step_times_us = std::move(ended);
    first_step += round.step_times_us.size();
    ended.clear();
    learner.apply_round(round);
    round = RoundResult{};
    return true;
  }
  void end_step(Learner& learner, double step_us) {
    learner.mark_step();
    ended.push_back(step_us);
  }
};

}  // namespace dynamiccl
