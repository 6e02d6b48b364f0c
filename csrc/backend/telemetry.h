// What the backend remembers for people (not for decisions): the per-call decision log that
// lets anyone compare ranks, a per-(engine, op, size bin) summary of calls and local times, and
// optional per-call trace records (DYNAMICCL_TRACE). Nothing here feeds the policy.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/types.h"

namespace dynamiccl {

// What was decided for one call and when it was issued: the decision log and the trace keep
// this record, the consensus round the part of it the learner needs.
struct CallRecord {
  uint64_t seq = 0;      // the group's collective (or point-to-point) sequence number
  uint64_t bytes = 0;    // this rank's payload
  int64_t start_ns = 0;  // local steady clock at issue
  uint32_t state_id = 0;
  uint32_t epoch = 0;
  uint16_t arm = kDefaultArm;
  Action action;  // the arm's configuration, for the engine
  OpKind op = OpKind::kAllReduce;
  EngineKind engine = EngineKind::kCpu;
  Role role = Role::kDefault;
  Exposure exposure = Exposure::kExposed;
  bool probe = false;
  bool after_probe = false;  // Decision::after_probe
  bool forced = false;       // DYNAMICCL_FORCE chose the arm
  bool learned = false;      // the learner chose it (consensus counts it)
  bool measured = false;     // the learner wants its cost (consensus carries it)
};

// A running hash over what every rank must decide alike for a call (sequence, op, bytes, role,
// state, arm, epoch): the decision log's running hash and each consensus round's are this one.
constexpr uint64_t kDecisionHashBasis = 1469598103934665603ull;  // any fixed start will do
uint64_t hash_decision(uint64_t h, const CallRecord& r);

// Local wall time of calls, per (engine, op, size bin). Updated from completion callbacks.
struct SummaryCell {
  void add_duration(int64_t ns) {
    timed.fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> timed{0};
  std::atomic<uint64_t> sum_ns{0};
  std::atomic<uint64_t> bytes{0};
};

struct TracedCall {
  CallRecord record;
  std::atomic<int64_t> end_ns{0};  // 0 while running (or when the engine gives no completion)
};

// How one call's completion is accounted: its cost for consensus (learned calls) or its local
// time in the summary, and the end of its trace record.
struct CallTiming {
  static constexpr uint64_t kNotLearned = ~0ull;
  uint64_t consensus_index = kNotLearned;
  SummaryCell* cell = nullptr;
  int64_t start_ns = 0;
  TracedCall* trace = nullptr;
};

class Telemetry {
 public:
  Telemetry(size_t log_capacity, bool trace);

  // Learned and forced calls: identical on every rank, so their hash compares ranks.
  void log_decision(const CallRecord& r);
  std::vector<CallRecord> decision_log() const;     // oldest first, at most the capacity
  uint64_t decision_hash() const { return hash_; }  // over every decision ever logged
  uint64_t decisions_logged() const { return logged_; }
  // A new membership (reconfigure) starts a new log: the decisions of every rank in it compare
  // from here, a rank that joined included.
  void restart_decisions() {
    log_.clear();
    logged_ = 0;
    hash_ = kDecisionHashBasis;
  }

  SummaryCell& summary(EngineKind engine, OpKind op, int bin) {
    return summary_[static_cast<int>(engine)][static_cast<int>(op)][bin];
  }
  const SummaryCell& summary(EngineKind engine, OpKind op, int bin) const {
    return summary_[static_cast<int>(engine)][static_cast<int>(op)][bin];
  }

  bool tracing() const { return trace_; }
  TracedCall& add_trace(const CallRecord& r);  // only when tracing(); references stay valid
  const std::deque<TracedCall>& traces() const { return traces_; }

 private:
  std::vector<CallRecord> log_;
  size_t log_capacity_;
  uint64_t logged_ = 0;
  uint64_t hash_ = kDecisionHashBasis;
  std::array<std::array<std::array<SummaryCell, kNumSizeBins>, kNumOps>, kNumEngines> summary_;
  bool trace_;
  std::deque<TracedCall> traces_;
};

}  // namespace dynamiccl
