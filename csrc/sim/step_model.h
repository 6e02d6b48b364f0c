// The step model: a training step's compute, the collectives beside it, and how long the step
// takes (used only when a scenario has compute, ComputeSpec::active()).
//
// Compute is one stream of segments, in order: per microbatch a forward (fwd_us) and a backward
// (bwd_us) segment, then one post segment (post_us). A call is issued when the compute stream
// reaches its position (microbatch, phase, 0..1 within the phase's segment). Each process group
// has one communication stream: a call starts when it is issued and its group's previous call
// has finished, and runs for its cost (the truth, with the call's noise).
//   - An exposed call blocks compute until it ends: the step pays its queueing plus its cost.
//   - An overlapped call runs beside compute. While it runs, compute progresses at rate
//     1 / (1 + sum of the running overlapped calls' slowdowns); its slowdown is
//         slow = sm_weight x channels / sms + mem_weight x min(1, hbm_share)
//         hbm_share = kHbmPasses x traffic(proto) x (bytes / cost) / hbm_GBps
//     with traffic(Simple) = 1, traffic(LL128) = 128/120, traffic(LL) = 2 (flags in every
//     line), channels the ones NCCL runs the call on (a cap lowers them). A send holds
//     kP2pChannels channels and moves Simple traffic.
//   - Overlapped calls are waited for when their phase's compute ends (a call at the phase's
//     very end, position 1, such as a pipeline send, at the end of the next phase; the step's
//     end at the latest). The wait is the call's tail: how far it outlasts the compute.
// Step time = the compute (stretched by interference) + exposed calls' time + the tails, i.e.
// the time at which the last segment ends and every stream is idle. The step starts with every
// stream idle (the previous step ended with a full wait). Deterministic: no randomness here.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/scenario_spec.h"

namespace dynamiccl {
namespace sim {

constexpr double kHbmPasses = 3.0;  // HBM bytes per byte of algorithm bandwidth (read, write, peer)
constexpr int kP2pChannels = 2;     // channels a send holds (NCCL's per-peer default)

// Compute slowdown of one running overlapped collective (see above).
double interference(const ComputeSpec& c, int channels, int proto, uint64_t bytes, double cost_us);

// A call as the step model sees it.
struct StepCall {
  int group = 0;
  int segment = 0;  // index into StepModel's segments
  double pos = 0;   // 0..1 within it
  bool overlapped = false;
};

class StepModel {
 public:
  // segment of (microbatch, phase): mb * 2 + phase for fwd/bwd, 2 * microbatches for post.
  StepModel(const ComputeSpec& compute, int microbatches, int groups);
  int segment(int mb, int phase) const;
  int segments() const { return static_cast<int>(work_.size()); }

  // Where a step stands; copyable (the oracle tries arms on copies).
  struct State {
    double t = 0;                   // the compute stream's clock
    int seg = 0;                    // current segment
    double done = 0;                // fraction of it done
    bool synced = false;            // its overlapped calls were already waited for
    std::vector<double> comm_free;  // per group
    struct Running {
      double start, end, slow;
      int call;  // caller's index, for waits
    };
    std::vector<Running> running;  // overlapped calls not yet waited for
  };
  State start() const;

  // A call's wait as it became known: the call's caller index and its exposed tail.
  struct Wait {
    int call;
    double wait_us;
  };

  // Issues call `index` (the caller's numbering) with its cost and slowdown; returns the exposed
  // wait of an exposed call (0 for an overlapped one; its tail is reported by a later sync).
  double issue(State& s, const StepCall& c, int index, double cost_us, double slow,
               std::vector<Wait>* waits) const;
  // Blocks the compute stream for `us` (e.g. a consensus round's control-plane all-reduce).
  void block(State& s, double us) const { s.t += us; }
  // Runs to the end of the current segment and waits for its overlapped calls: the time then.
  double project(State s) const;
  // Runs every remaining segment, waits for everything: the step time.
  double finish(State& s, std::vector<Wait>* waits) const;

 private:
  std::vector<double> work_;  // per segment, us at full speed
  int microbatches_;
  int groups_;
  void advance(State& s, double work) const;  // compute `work` us at full speed, interfered
  void sync(State& s, std::vector<Wait>* waits) const;
  void end_segment(State& s, std::vector<Wait>* waits) const;
  void move_to(State& s, int seg, double pos, std::vector<Wait>* waits) const;
};

}  // namespace sim
}  // namespace dynamiccl
