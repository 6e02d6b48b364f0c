// What the backend remembers for people (not for decisions): the per-call decision log that
// lets anyone compare ranks, a per-(engine, op, size bin) summary of calls and local times, and
// optional per-call trace records (DYNAMICCL_TRACE). Nothing here feeds the policy.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "core/types.h"

namespace dynamiccl {

constexpr int kNumEngines = 2;  // 0 = CPU (Gloo + our schedules), 1 = NCCL

struct DecisionLogEntry {
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint32_t state_id = 0;
  uint32_t epoch = 0;
  uint16_t arm = 0;
  uint8_t op = 0;
  uint8_t engine = 0;
  bool probe = false;
  bool forced = false;
};

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

struct TraceEntry {
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  std::atomic<int64_t> end_ns{0};
  uint32_t epoch = 0;
  uint16_t arm = 0;
  uint8_t op = 0;
  uint8_t engine = 0;
  uint8_t role = 0;
  bool probe = false;
};

class Telemetry {
 public:
  Telemetry(size_t log_capacity, bool trace);

  void log_decision(const DecisionLogEntry& e);
  std::vector<DecisionLogEntry> decision_log() const;  // oldest first, at most the capacity
  uint64_t decision_hash() const { return hash_; }     // over every decision ever logged
  uint64_t decisions_logged() const { return logged_; }

  SummaryCell& summary(int engine, OpKind op, int bin) {
    return summary_[engine][static_cast<int>(op)][bin];
  }
  const SummaryCell& summary(int engine, OpKind op, int bin) const {
    return summary_[engine][static_cast<int>(op)][bin];
  }

  bool tracing() const { return trace_; }
  TraceEntry& add_trace();  // only when tracing(); references stay valid (deque)
  const std::deque<TraceEntry>& traces() const { return traces_; }

 private:
  std::vector<DecisionLogEntry> log_;
  size_t log_capacity_;
  uint64_t logged_ = 0;
  uint64_t hash_ = 1469598103934665603ull;  // FNV-1a offset basis
  std::array<std::array<std::array<SummaryCell, kNumSizeBins>, kNumOps>, kNumEngines> summary_;
  bool trace_;
  std::deque<TraceEntry> traces_;
};

}  // namespace dynamiccl
