#include "backend/consensus.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace dynamiccl {

namespace {
constexpr float kMissing = std::numeric_limits<float>::infinity();
// ConsensusSlot::done: low bits of the call index above a duration of up to 2^40 ns (18 min).
constexpr int kDurationBits = 40;
constexpr uint64_t kDurationMask = (1ull << kDurationBits) - 1;
uint64_t done_tag(uint64_t index) { return index & ((1ull << (64 - kDurationBits)) - 1); }
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

float Consensus::sign_of(EngineKind engine) const {
  const bool max = reduce_ == CostReduce::kMax ||
                   (reduce_ == CostReduce::kAuto && engine == EngineKind::kCpu);
  return max ? -1.f : 1.f;
}

Consensus::Consensus(int round_calls, CostReduce reduce,
                     c10::intrusive_ptr<c10d::Backend> control)
    : k_(round_calls), reduce_(reduce), control_(std::move(control)), ring_(2 * round_calls) {}

ConsensusSlot& Consensus::begin_call(const CallRecord& call, SummaryCell* cell) {
  const uint64_t index = next_index_;
  ConsensusSlot& rec = ring_[index % ring_.size()];
  rec.call_index.store(ConsensusSlot::kInvalid, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  rec.done.store(0, std::memory_order_relaxed);
  rec.unavailable.store(false, std::memory_order_relaxed);
  rec.timed_work.reset();
  rec.engine = call.engine;
  rec.state_id = call.state_id;
  rec.arm = call.arm;
  rec.cell.store(cell, std::memory_order_relaxed);
  rec.start_ns.store(call.start_ns, std::memory_order_relaxed);
  rec.call_index.store(index, std::memory_order_release);
  return rec;
}

void Consensus::complete(uint64_t index, int64_t end_ns) {
  ConsensusSlot& rec = ring_[index % ring_.size()];
  if (rec.call_index.load(std::memory_order_acquire) != index) return;
  const int64_t start = rec.start_ns.load(std::memory_order_relaxed);
  SummaryCell* cell = rec.cell.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (rec.call_index.load(std::memory_order_relaxed) != index) return;  // reused meanwhile
  const uint64_t dur = static_cast<uint64_t>(std::max<int64_t>(end_ns - start, 1));
  rec.done.store(done_tag(index) << kDurationBits | std::min(dur, kDurationMask),
                 std::memory_order_release);
  if (cell) cell->add_duration(end_ns - start);
}

void Consensus::end_call(std::array<Learner*, kNumEngines> learners) {
  ++next_index_;
  if (next_index_ % k_ != 0) return;
  // Boundary after round r = next_index_/K - 1: apply round r-1 (its all-reduce has had K calls
  // to finish), then start round r's. Every rank reaches this line at the same call index.
  apply_pending(learners);
  start_round(next_index_ - k_, k_);
}

void Consensus::start_round(uint64_t first, uint64_t count) {
  // Payload: per call, the cost in µs (negated where it is to be max-reduced, so one MIN
  // all-reduce serves both), then per call -1 if this rank could not apply the arm, then the two
  // signals.
  const int64_t n = static_cast<int64_t>(count);
  at::Tensor payload = at::empty({2 * n + 2}, at::kFloat);
  float* p = payload.data_ptr<float>();
  pending_.engine.resize(count);
  pending_.state.resize(count);
  pending_.arm.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    ConsensusSlot& rec = ring_[(first + i) % ring_.size()];
    pending_.engine[i] = rec.engine;
    pending_.state[i] = rec.state_id;
    pending_.arm[i] = rec.arm;
    float cost = kMissing;
    if (rec.timed_work) {
      // NCCL: GPU time from the inner work's events, only once it is done (never block).
      if (rec.timed_work->isCompleted()) {
        const float ms = rec.timed_work->getDuration();
        if (ms > 0) cost = ms * 1000.f;
      }
      rec.timed_work.reset();
    } else {
      const uint64_t done = rec.done.load(std::memory_order_acquire);
      if (done != 0 && done >> kDurationBits == done_tag(first + i)) {
        cost = std::max(0.001f, static_cast<float>(done & kDurationMask) / 1000.f);
      }
    }
    p[i] = cost == kMissing ? kMissing : sign_of(rec.engine) * cost;
    p[n + i] = rec.unavailable.load(std::memory_order_relaxed) ? -1.f : 0.f;
  }
  {
    std::lock_guard<std::mutex> lock(signal_mu_);
    p[2 * n] = step_n_ ? static_cast<float>(step_sum_ / step_n_) : kMissing;
    p[2 * n + 1] = loss_n_ ? static_cast<float>(loss_sum_ / loss_n_) : kMissing;
    step_sum_ = loss_sum_ = 0;
    step_n_ = loss_n_ = 0;
  }
  pending_.first = first;
  pending_.count = count;
  pending_.payload = {payload};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::MIN);
  opts.timeout = timeout_;
  pending_.work = control_->allreduce(pending_.payload, opts);
}

void Consensus::apply_pending(std::array<Learner*, kNumEngines> learners) {
  if (!pending_.work) return;
  pending_.work->wait(timeout_);  // a dead peer turns into the group's timeout error here
  pending_.work.reset();
  const float* p = pending_.payload[0].data_ptr<float>();
  const int64_t n = static_cast<int64_t>(pending_.count);
  std::array<RoundResult, kNumEngines> rounds;
  const double step = p[2 * n], loss = p[2 * n + 1];
  for (auto& r : rounds) {
    r.step_time_us = std::isinf(step) ? NAN : step;
    r.loss = std::isinf(loss) ? NAN : loss;
  }
  for (int64_t i = 0; i < n; ++i) {
    RoundResult& r = rounds[static_cast<int>(pending_.engine[i])];
    if (p[n + i] < 0) r.unavailable.emplace_back(pending_.state[i], pending_.arm[i]);
    if (std::isinf(p[i])) continue;  // no rank measured it (still running): not reported
    r.calls.push_back(
        CallOutcome{pending_.state[i], pending_.arm[i], sign_of(pending_.engine[i]) * p[i]});
  }
  for (int e = 0; e < kNumEngines; ++e) {
    if (learners[e]) learners[e]->apply_round(rounds[e]);
  }
  ++rounds_applied_;
}

void Consensus::add_step_time(double us) {
  std::lock_guard<std::mutex> lock(signal_mu_);
  step_sum_ += us;
  ++step_n_;
}

void Consensus::add_loss(double loss) {
  std::lock_guard<std::mutex> lock(signal_mu_);
  loss_sum_ += loss;
  ++loss_n_;
}

void Consensus::drain() noexcept {
  try {
    if (pending_.work) pending_.work->wait(timeout_);
  } catch (...) {
  }
  pending_.work.reset();
}

}  // namespace dynamiccl
