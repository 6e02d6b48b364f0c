// When a group's learned calls have their costs agreed on (docs/architecture.md, "Consensus
// rounds"). The backend's consensus controller and the simulator both follow it, so the
// simulator's figures are the product's.
//
// Learned calls are numbered 0, 1, ... in the group's call order. Every K of them close a round.
// A round that holds at least one measured call (the learner asked for its cost) is reduced
// across ranks and applied at the boundary of the next round, K calls later, at the same call
// index on every rank; a round that measured nothing is skipped (nothing to agree on), and its
// boundary still applies the round before it — except that a round runs at least once per
// kAgreementCalls learned calls all the same, carrying only the decision hash (consensus.h): the
// ranks' agreement is checked even in `frozen` mode and once every state has settled, at the
// cost of one control all-reduce per kAgreementCalls calls. Measured calls keep their record in
// slot index % 2K until their round is applied: the round being measured and the one in flight.
// Torch-free, deterministic: it reads nothing but the calls it is told about.
#pragma once

#include <cstdint>

namespace dynamiccl {

// A round's all-reduce over `ranks` ranks, in sequential exchanges: the product runs it as
// recursive doubling over the largest power of two (CpuEngine::min_allreduce), the ranks beyond
// it folded in before and out after (two exchanges more). What a round takes is this times one
// exchange's latency on the hosts' network (docs/scale.md); the simulator prices rounds so.
int round_exchanges(int ranks);

class RoundScheduler {
 public:
  static constexpr uint64_t kAgreementCalls = 1024;
  // A measured call's cost reaches the learner at most this many rounds after its own round:
  // applied at the next round's boundary, or a round later where the engine's time is read only
  // once that round closes (GPU work timed by events). A cost not back by then never comes.
  static constexpr int kCostLatencyRounds = 2;

  explicit RoundScheduler(int round_calls);

  int round_calls() const { return k_; }
  int slots() const { return 2 * k_; }
  static int slot_of(uint64_t index, int round_calls) {
    return static_cast<int>(index % (2 * static_cast<uint64_t>(round_calls)));
  }
  uint64_t calls() const { return next_; }  // the index the next call gets
  uint64_t rounds_started() const { return started_; }
  uint64_t rounds_applied() const { return applied_; }

  // Counts the next learned call; returns its index.
  uint64_t add_call(bool measured) {
    measured_in_round_ += measured ? 1 : 0;
    return next_++;
  }

  // What the boundary after the call just added asks for (nothing between boundaries).
  struct Boundary {
    bool at = false;     // this call closed a round's window (every K-th)
    bool apply = false;  // apply the round in flight
    bool start = false;  // reduce the round that just closed: calls [first, first + K)
    uint64_t first = 0;
  };
  Boundary end_call();

 private:
  int k_;
  uint64_t next_ = 0;
  uint32_t measured_in_round_ = 0;
  uint64_t unchecked_ = 0;  // learned calls since the last round started
  bool in_flight_ = false;
  uint64_t started_ = 0;
  uint64_t applied_ = 0;
};

}  // namespace dynamiccl
