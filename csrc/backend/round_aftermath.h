// What a CPU consensus round costs the job, as each rank's calling thread sees it
// (docs/architecture.md, "Consensus rounds"). The calling thread's lap of a learned call is the
// time from its issue to the next learned call's issue: the call, the wait for it, the caller's
// own work in between, and at a round boundary the round's start. A round costs what the laps
// from its boundary until its all-reduce has completed (and one more) took over their states'
// usual laps, plus the time applying it took at the boundary K calls later. The all-reduce's own
// duration is not the price: on a shared machine it competes with the calls beside it for the
// cores, but over a WAN it mostly waits on the network while they run unhindered.
//
// Local to a rank, torch-free, on the calling thread. Consensus feeds it at every boundary and
// carries each rank's samples in a later round, so that every rank prices rounds by the same
// agreed figure.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/telemetry.h"

namespace dynamiccl {

class RoundAftermath {
 public:
  explicit RoundAftermath(int round_calls);

  // At the boundary after `next` learned calls (every K), once the round in flight (if any) was
  // applied: `applied` says whether one was, its all-reduce completed at `completed_ns` (local
  // clock) and applying it took `apply_us`; `started` says whether a round starts here.
  // `records` holds the last 2K calls' decisions by index (Consensus).
  void boundary(uint64_t next, const std::vector<CallRecord>& records, bool applied,
                int64_t completed_ns, double apply_us, bool started);

  // The mean of the rounds' costs found since the last take (µs), NaN if none.
  double take_sample();

 private:
  const uint64_t k_;
  // The boundary K calls back: whether a round started there, and what applying the round
  // before it took there (its lap holds that too, and that round was charged for it).
  bool started_before_ = false;
  bool busy_before_ = false;
  double applied_before_us_ = 0;
  // Per CPU state id: the usual lap (ns) of its calls with no round beside them.
  std::vector<double> usual_ns_;
  double sample_sum_us_ = 0;
  int samples_ = 0;
};

}  // namespace dynamiccl
