// The consensus controller of one group (docs/architecture.md, "Consensus rounds"), on the
// round schedule every group and the simulator share (policy/round_scheduler.h): the measured
// costs of each round of K learned calls are all-reduced asynchronously and applied K calls
// later, so every rank applies the same numbers at the same call index and enters the next
// policy epoch with the same table. Local timings never reach decide() except through here.
//
// A round travels on the group's own CPU engine (RoundTransport): a MIN all-reduce by recursive
// doubling over its point-to-point operations (CpuEngine::min_allreduce), log2 N hops on
// connections the group already has, run on the schedule threads so that it never blocks the
// caller or a GPU stream.
//
// Every round also carries a hash of the decisions each rank made in it: ranks whose settings or
// hints differ decide differently, and the round that shows it fails the group on every rank
// with an error naming the first call they disagreed on (instead of running on with mismatched
// schedules).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/round_aftermath.h"
#include "backend/telemetry.h"
#include "policy/learner.h"
#include "policy/round_scheduler.h"

namespace dynamiccl {

int64_t now_ns();

// What is remembered of one measured call until its cost has been agreed on.
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
  bool probe = false;
  bool after_probe = false;
  std::atomic<int64_t> start_ns{0};
  std::atomic<uint64_t> done{0};              // CPU: tag of the call index << 40 | duration (ns)
  std::atomic<SummaryCell*> cell{nullptr};    // the call's row in the local summary
  c10::intrusive_ptr<c10d::Work> timed_work;  // NCCL: the inner work, timed on the GPU
  std::atomic<bool> unavailable{false};       // the engine could not apply the arm on this rank
  std::atomic<int> channels{0};  // NCCL: the channels it ran the call with (0: not said)
};

// How a group's rounds travel: a MIN all-reduce of the payload in place, whose future completes
// once it is done (or fails within the group's timeout when a peer does not answer), and a
// blocking all-gather, which names a disagreement.
struct RoundTransport {
  std::function<c10::intrusive_ptr<c10::ivalue::Future>(const at::Tensor&)> min_allreduce;
  std::function<std::vector<at::Tensor>(const at::Tensor&)> allgather;
};

class Consensus {
 public:
  Consensus(int round_calls, CostReduce reduce, RoundTransport transport);

  // Every learned call, in order: its record (the decision hash covers it) and, when the learner
  // asked for its cost, the slot that will hold it. Returns the call's index.
  uint64_t add_call(const CallRecord& call);
  ConsensusSlot& slot(uint64_t index) { return ring_[index % ring_.size()]; }
  // Marks measured CPU call `index` complete at `end_ns` (from any thread; a slot already reused
  // by a later call is left alone).
  void complete(uint64_t index, int64_t end_ns);
  // After the call is issued: at round boundaries, applies the round in flight to `learners` and
  // starts the next all-reduce. Called on the collective's calling thread. Throws (and keeps
  // throwing) once the ranks were found to disagree. True when this call closed a round.
  bool end_call(std::array<Learner*, kNumEngines> learners);

  // Signals, folded into the next round. A step boundary (DDP's last bucket, dynamiccl_pg.step)
  // at the same call index on every rank: the time since the previous one is a step's time.
  void end_step(int64_t now);
  uint64_t steps_ended() {
    std::lock_guard<std::mutex> lock(signal_mu_);
    return steps_ended_;
  }
  void add_loss(double loss);

  uint64_t learned_calls() const { return schedule_.calls(); }
  // Why the group failed (the ranks disagreed); empty while it has not.
  const std::string& failure() const { return failure_; }
  uint64_t rounds_applied() const { return schedule_.rounds_applied(); }
  uint64_t rounds_started() const { return schedule_.rounds_started(); }
  // What the last applied round cost, as every rank agreed and the engine's learner prices it
  // (µs; 0 before the second round): RoundResult::round_cost_us.
  double round_cost_us(EngineKind e) const { return round_cost_us_[static_cast<int>(e)]; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Waits for an in-flight all-reduce (shutdown); errors are swallowed, the group is going away.
  void drain() noexcept;
  // Forgets the round in flight without waiting for it (abort: its peers may be gone).
  void abandon() noexcept { pending_.future.reset(); }
  void release_engine() { transport_ = RoundTransport{}; }

 private:
  // Two words per call of the round (2K), then the per-round words below, then one word per
  // step that ended since the last round (at most K: older ones are dropped).
  enum Word {
    kHashMin,
    kHashNegMax,
    kStepTime,
    kLoss,
    kRoundCost,
    kRoundBlock,
    kAftermathMin,
    kAftermathNegMax,
    kNumRoundWords
  };
  void start_round(uint64_t first);
  void apply_pending(std::array<Learner*, kNumEngines> learners);
  [[noreturn]] void fail_on_disagreement();
  bool max_reduced(EngineKind e) const { return reduces_by_max(reduce_, e); }

  const int k_;
  const CostReduce reduce_;
  RoundTransport transport_;
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
  RoundScheduler schedule_;
  std::vector<ConsensusSlot> ring_;  // 2K slots: the round being measured and the one in flight
  std::vector<CallRecord> records_;  // 2K decisions, for naming a disagreement
  uint64_t round_hash_;              // over the decisions since the last round started
  uint64_t hash_from_ = 0;           // the first call round_hash_ covers
  std::string failure_;              // set once the ranks were found to disagree

  // The round in flight: its first call, the first call its decisions' hash covers (earlier
  // when rounds were skipped), and the all-reduce carrying it.
  struct Pending {
    uint64_t first = 0;
    uint64_t hash_from = 0;
    at::Tensor payload;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    int64_t issued_ns = 0;
    uint64_t first_step = 0;
    int steps = 0;
    std::shared_ptr<std::atomic<int64_t>> completed_ns;
  } pending_;
  // What this rank's last round cost: how long its all-reduce took, and how long it
  // held up the calling thread at the boundary where it was applied.
  double last_round_us_ = 0;
  double last_block_us_ = 0;
  int64_t last_completed_ns_ = 0;
  // What a CPU round costs the calling thread (RoundAftermath): this rank's samples, and the
  // price every rank agreed on from them (a moving average over rounds; unset before the first).
  RoundAftermath aftermath_;
  double cpu_round_price_us_ = NAN;
  std::array<double, kNumEngines> round_cost_us_{};

  std::mutex signal_mu_;
  double step_sum_ = 0, loss_sum_ = 0;
  int step_n_ = 0, loss_n_ = 0;
  // The steps that ended since the last round started: their times (NaN for the first step,
  // which has no start), the first one's number, and the last boundary.
  std::vector<double> step_times_us_;
  uint64_t steps_ended_ = 0;
  int64_t last_step_ns_ = 0;
};

}  // namespace dynamiccl
