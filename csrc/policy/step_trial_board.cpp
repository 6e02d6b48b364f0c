#include "policy/step_trial_board.h"

namespace dynamiccl {

void StepTrialBoard::take_probe_cost(uint32_t state, double extra_us) {
  while (probes_awaited > 0 && probes[probes_first].state != state) pop_probe();
  if (probes_awaited == 0) return;
  const uint64_t s = pop_probe().step;
  if (s == step) {
    probe_extra_us += extra_us;
    return;
  }
  for (Mark& m : marks) {
    if (m.step == s) {
      m.probe_extra_us += extra_us;
      return;
    }
  }
}

void StepTrialBoard::open(int lane, int32_t state) {
  TrialLane& l = lanes[lane];
  const TrialLane& other = lanes[1 - lane];
  l.owner = state;
  l.start = step + 1;  // the current step began before the trial: it is not part of it
  if (other.owner >= 0 && ((l.start - other.start) & 1) != 0) ++l.start;
  l.used_steps = 0;
  l.used = false;
  l.pending = {};
  for (Mark& m : marks) m.used[lane] = false;  // steps of the lane's previous trial
}

void StepTrialBoard::end_step() {
  Mark mark{step, {}, probed, probe_extra_us};
  bool trialed = false;
  for (int j = 0; j < kTrialLanes; ++j) {
    TrialLane& lane = lanes[j];
    if (lane.running_at(step)) {
      mark.used[j] = lane.used;
      lane.used_steps += lane.used;
      trialed = true;
    }
    lane.used = false;
  }
  if (trialed) marks.push_back(mark);
  probed = false;
  probe_extra_us = 0;
  ++step;
}

}  // namespace dynamiccl
