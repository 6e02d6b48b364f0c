// The consensus controller of one group (DESIGN.md §2.6): every K learned calls, start an
// asynchronous control-plane all-reduce of the costs measured since the last round, and apply the
// reduced result K calls later. Every rank applies the same numbers at the same call index, so
// every rank's learner enters the next epoch with the same table. Local timings never reach
// decide() except through here.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/telemetry.h"
#include "policy/learner.h"

namespace dynamiccl {

int64_t now_ns();

// What is remembered of one learned call until its cost has been agreed on.
// A CPU call may complete on another thread after its slot was reused by a later call (more
// than 2K learned calls in flight): the slot is a seqlock (call_index is invalid while it is
// rewritten) and the completion is stored with its call index, so a late one never passes for
// the later call's.
struct ConsensusSlot {
  static constexpr uint64_t kInvalid = ~0ull;
  std::atomic<uint64_t> call_index{kInvalid};  // which call owns the slot (slots are reused)
  EngineKind engine = EngineKind::kCpu;
  uint32_t state_id = 0;
  uint16_t arm = 0;
  std::atomic<int64_t> start_ns{0};
  std::atomic<uint64_t> done{0};            // CPU: tag of the call index << 40 | duration (ns)
  std::atomic<SummaryCell*> cell{nullptr};  // the call's row in the local summary
  c10::intrusive_ptr<c10d::Work> timed_work;  // NCCL: the inner work, timed on the GPU
  std::atomic<bool> unavailable{false};     // the engine could not apply the arm on this rank
};

class Consensus {
 public:
  Consensus(int round_calls, CostReduce reduce, c10::intrusive_ptr<c10d::Backend> control);

  // The slot for the next learned call (call index = learned_calls()).
  ConsensusSlot& begin_call(const CallRecord& call, SummaryCell* cell);
  // Marks CPU call `index` complete at `end_ns` (from any thread; a slot already reused by a
  // later call is left alone).
  void complete(uint64_t index, int64_t end_ns);
  // After the call is issued: at round boundaries, applies the previous round's agreed result to
  // `learners` and starts the next all-reduce. Called on the collective's calling thread.
  void end_call(std::array<Learner*, kNumEngines> learners);

  // Signals (dynamiccl_pg.step / report_loss); folded into the next round.
  void add_step_time(double us);
  void add_loss(double loss);

  uint64_t learned_calls() const { return next_index_; }
  uint64_t rounds_applied() const { return rounds_applied_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Waits for an in-flight all-reduce (shutdown); errors are swallowed, the group is going away.
  void drain() noexcept;
  void release_engine() { control_.reset(); }

 private:
  void start_round(uint64_t first, uint64_t count);
  float sign_of(EngineKind engine) const;  // -1 where costs are max-reduced
  void apply_pending(std::array<Learner*, kNumEngines> learners);

  const int k_;
  const CostReduce reduce_;
  c10::intrusive_ptr<c10d::Backend> control_;
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
  std::vector<ConsensusSlot> ring_;  // 2K slots: the round being measured and the one in flight
  uint64_t next_index_ = 0;
  uint64_t rounds_applied_ = 0;

  // The round in flight: which calls, and the all-reduce carrying their costs.
  struct Pending {
    uint64_t first = 0, count = 0;
    std::vector<at::Tensor> payload;
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<EngineKind> engine;
    std::vector<uint32_t> state;
    std::vector<uint16_t> arm;
  } pending_;

  std::mutex signal_mu_;
  double step_sum_ = 0, loss_sum_ = 0;
  int step_n_ = 0, loss_n_ = 0;
};

}  // namespace dynamiccl
