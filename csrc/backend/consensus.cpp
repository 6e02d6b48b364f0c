#include "backend/consensus.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

namespace dynamiccl {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// ConsensusSlot::done: low bits of the call index above a duration of up to 2^40 ns (18 min).
constexpr int kDurationBits = 40;
constexpr uint64_t kDurationMask = (1ull << kDurationBits) - 1;
uint64_t done_tag(uint64_t index) { return index & ((1ull << (64 - kDurationBits)) - 1); }

// The CPU round's price follows its samples with this gain (about the last 4 rounds').
constexpr double kPriceGain = 0.25;
// A call's engine word when a rank could not apply its arm: above any channel count.
constexpr double kUnavailableWord = 1 << 20;
// Decision hashes travel as doubles: 52 bits stay exact.
constexpr uint64_t kHashMask = (1ull << 52) - 1;
// The decision record exchanged to name a disagreement: one row per call of the round.
constexpr int kRecordWords = 7;
void write_record(double* w, const CallRecord& r) {
  w[0] = static_cast<double>(r.seq);
  w[1] = static_cast<double>(r.op);
  w[2] = static_cast<double>(r.bytes);
  w[3] = static_cast<double>(r.role);
  w[4] = static_cast<double>(r.state_id);
  w[5] = static_cast<double>(r.arm);
  w[6] = static_cast<double>(r.epoch);
}
std::string describe_record(const double* w) {
  std::ostringstream os;
  os << op_name(static_cast<OpKind>(w[1])) << " of " << static_cast<uint64_t>(w[2])
     << " bytes (call #" << static_cast<uint64_t>(w[0]) << "): role "
     << role_name(static_cast<Role>(w[3])) << ", state " << static_cast<uint64_t>(w[4]) << ", arm "
     << static_cast<uint64_t>(w[5]) << ", epoch " << static_cast<uint64_t>(w[6]);
  return os.str();
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Consensus::Consensus(int round_calls, CostReduce reduce, RoundTransport transport)
    : k_(round_calls),
      reduce_(reduce),
      transport_(std::move(transport)),
      schedule_(round_calls),
      ring_(schedule_.slots()),
      records_(schedule_.slots()),
      round_hash_(kDecisionHashBasis),
      aftermath_(round_calls) {}

uint64_t Consensus::add_call(const CallRecord& call) {
  const uint64_t index = schedule_.add_call(call.measured);
  records_[index % records_.size()] = call;
  round_hash_ = hash_decision(round_hash_, call);
  if (!call.measured) return index;
  ConsensusSlot& rec = slot(index);
  rec.call_index.store(ConsensusSlot::kInvalid, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  rec.done.store(0, std::memory_order_relaxed);
  rec.unavailable.store(false, std::memory_order_relaxed);
  rec.channels.store(0, std::memory_order_relaxed);
  rec.timed_work.reset();
  rec.engine = call.engine;
  rec.state_id = call.state_id;
  rec.arm = call.arm;
  rec.probe = call.probe;
  rec.after_probe = call.after_probe;
  rec.cell.store(nullptr, std::memory_order_relaxed);
  rec.start_ns.store(call.start_ns, std::memory_order_relaxed);
  rec.call_index.store(index, std::memory_order_release);
  return index;
}

void Consensus::complete(uint64_t index, int64_t end_ns) {
  ConsensusSlot& rec = slot(index);
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

bool Consensus::end_call(std::array<Learner*, kNumEngines> learners) {
  if (!failure_.empty()) C10_THROW_ERROR(DistBackendError, failure_);
  const RoundScheduler::Boundary b = schedule_.end_call();
  if (!b.at) return false;
  for (Learner* learner : learners) {
    if (learner) learner->close_window();
  }
  // Every rank reaches a boundary at the same call index: apply the round in flight (its
  // all-reduce has had K calls to finish), then start the one that just closed. How long the
  // apply held up the calling thread is part of the round's price (RoundAftermath).
  double apply_us = 0;
  if (b.apply) {
    const int64_t t = now_ns();
    apply_pending(learners);
    apply_us = static_cast<double>(now_ns() - t) / 1e3;
  }
  aftermath_.boundary(schedule_.calls(), records_, b.apply, last_completed_ns_, apply_us, b.start);
  if (b.start) start_round(b.first);
  return b.start;
}

void Consensus::start_round(uint64_t first) {
  // Per call: the cost in µs, negated where it is max-reduced, so that one MIN all-reduce serves
  // both; a cost no rank measured (or not yet: still running) is +inf, or -inf where max-reduced,
  // so that one unfinished rank makes it unknown. Then per call what the engine said of it,
  // negated so that MIN takes the most: kUnavailableWord where this rank could not apply the arm
  // (on one rank is enough), else the channels NCCL ran it with (0: not said). Then the round
  // words.
  at::Tensor payload = at::empty({3 * k_ + kNumRoundWords}, at::kDouble);
  double* p = payload.data_ptr<double>();
  for (int i = 0; i < k_; ++i) {
    const uint64_t index = first + static_cast<uint64_t>(i);
    ConsensusSlot& rec = slot(index);
    const bool measured = rec.call_index.load(std::memory_order_acquire) == index;
    double cost = kInf;
    if (measured && rec.timed_work) {
      // NCCL: GPU time from the inner work's events, only once it is done (never block).
      if (rec.timed_work->isCompleted()) {
        const float ms = rec.timed_work->getDuration();
        if (ms > 0) cost = ms * 1000.0;
      }
      rec.timed_work.reset();
    } else if (measured) {
      const uint64_t done = rec.done.load(std::memory_order_acquire);
      if (done != 0 && done >> kDurationBits == done_tag(index)) {
        cost = std::max(0.001, static_cast<double>(done & kDurationMask) / 1000.0);
      }
    }
    p[i] = max_reduced(rec.engine) ? -cost : cost;
    double said = 0;
    if (measured) {
      said = rec.unavailable.load(std::memory_order_relaxed)
                 ? kUnavailableWord
                 : static_cast<double>(rec.channels.load(std::memory_order_relaxed));
    }
    p[k_ + i] = -said;
  }
  double* w = p + 2 * k_;
  const uint64_t h = round_hash_ & kHashMask;
  round_hash_ = kDecisionHashBasis;
  pending_.hash_from = hash_from_;
  hash_from_ = first + static_cast<uint64_t>(k_);
  w[kHashMin] = static_cast<double>(h);
  w[kHashNegMax] = -static_cast<double>(h);
  {
    std::lock_guard<std::mutex> lock(signal_mu_);
    w[kStepTime] = step_n_ ? step_sum_ / step_n_ : kInf;
    w[kLoss] = loss_n_ ? loss_sum_ / loss_n_ : kInf;
    step_sum_ = loss_sum_ = 0;
    step_n_ = loss_n_ = 0;
    // Each step's time, max over ranks (negated for the MIN all-reduce); the newest K.
    const size_t n = step_times_us_.size();
    const size_t keep = std::min<size_t>(n, static_cast<size_t>(k_));
    pending_.first_step = steps_ended_ - keep;
    pending_.steps = static_cast<int>(keep);
    double* steps = w + kNumRoundWords;
    for (int i = 0; i < k_; ++i) {
      const double us = i < static_cast<int>(keep) ? step_times_us_[n - keep + i] : NAN;
      steps[i] = std::isfinite(us) ? -us : kInf;
    }
    step_times_us_.clear();
  }
  w[kRoundCost] = last_round_us_ > 0 ? -last_round_us_ : kInf;  // max over ranks
  w[kRoundBlock] = last_round_us_ > 0 ? -last_block_us_ : kInf;
  const double aftermath = aftermath_.take_sample();
  w[kAftermathMin] = std::isfinite(aftermath) ? aftermath : kInf;
  w[kAftermathNegMax] = std::isfinite(aftermath) ? -aftermath : kInf;
  pending_.first = first;
  pending_.payload = payload;
  pending_.issued_ns = now_ns();
  pending_.future = transport_.min_allreduce(pending_.payload);
  // When it finished: what measuring costs (the round's all-reduce), reported next round.
  pending_.completed_ns = std::make_shared<std::atomic<int64_t>>(0);
  pending_.future->addCallback(
      [done = pending_.completed_ns](c10::ivalue::Future&) { done->store(now_ns()); });
}

void Consensus::apply_pending(std::array<Learner*, kNumEngines> learners) {
  const int64_t wait_start = now_ns();
  // A dead peer turns into the group's timeout error here: every exchange of the round waits at
  // most the group's timeout.
  pending_.future->wait();
  auto future = std::move(pending_.future);
  if (future->hasError()) std::rethrow_exception(future->exception_ptr());
  const int64_t done = pending_.completed_ns->load();
  const int64_t end = done > 0 ? done : now_ns();
  last_completed_ns_ = end;
  last_round_us_ = static_cast<double>(end - pending_.issued_ns) / 1e3;
  last_block_us_ = static_cast<double>(std::max<int64_t>(0, end - wait_start)) / 1e3;
  const double* p = pending_.payload.data_ptr<double>();
  const double* w = p + 2 * k_;
  if (w[kHashMin] != -w[kHashNegMax]) fail_on_disagreement();
  std::array<RoundResult, kNumEngines> rounds;
  for (RoundResult& r : rounds) {
    r.step_time_us = std::isinf(w[kStepTime]) ? NAN : w[kStepTime];
    r.loss = std::isinf(w[kLoss]) ? NAN : w[kLoss];
    r.round_calls = k_;
    r.first_step = pending_.first_step;
    for (int i = 0; i < pending_.steps; ++i) {
      const double us = w[kNumRoundWords + i];
      r.step_times_us.push_back(std::isinf(us) ? NAN : -us);
    }
  }
  // What a round costs the job. On CPU: what it took from the calling thread's laps and its apply
  // (RoundAftermath), the midrange over ranks (each rank's sample is the same cost plus its own
  // noise), averaged over rounds; until the first such sample, the all-reduce's whole duration.
  // Next to NCCL it runs on the host while the GPU works, so only the time it held up the
  // calling thread at the boundary that applied it.
  const double lo = w[kAftermathMin], hi = -w[kAftermathNegMax];
  if (std::isfinite(lo) && std::isfinite(hi)) {
    const double sample = (lo + hi) / 2;
    cpu_round_price_us_ = std::isnan(cpu_round_price_us_)
                              ? sample
                              : cpu_round_price_us_ + (sample - cpu_round_price_us_) * kPriceGain;
  }
  double& cpu_cost = rounds[static_cast<int>(EngineKind::kCpu)].round_cost_us;
  if (!std::isnan(cpu_round_price_us_)) {
    cpu_cost = std::max(0.0, cpu_round_price_us_);
  } else {
    cpu_cost = std::isinf(w[kRoundCost]) ? 0.0 : -w[kRoundCost];
  }
  rounds[static_cast<int>(EngineKind::kNccl)].round_cost_us = std::isinf(w[kRoundBlock])
                                                                  ? 0.0
                                                                  : -w[kRoundBlock];
  for (int e = 0; e < kNumEngines; ++e) round_cost_us_[e] = rounds[e].round_cost_us;
  for (int i = 0; i < k_; ++i) {
    const uint64_t index = pending_.first + static_cast<uint64_t>(i);
    const ConsensusSlot& rec = slot(index);
    if (rec.call_index.load(std::memory_order_acquire) != index) continue;  // not measured
    RoundResult& r = rounds[static_cast<int>(rec.engine)];
    const double said = -p[k_ + i];
    if (said >= kUnavailableWord) r.unavailable.emplace_back(rec.state_id, rec.arm);
    const int channels = said < kUnavailableWord ? static_cast<int>(said) : 0;
    const double cost = max_reduced(rec.engine) ? -p[i] : p[i];
    // Unknown (a rank had not finished): only a probe needs reporting, to release its budget.
    if (std::isinf(cost) && !rec.probe) continue;
    r.calls.push_back(CallOutcome{rec.state_id, rec.arm,
                                  std::isinf(cost) ? NAN : static_cast<float>(cost), rec.probe,
                                  rec.after_probe, static_cast<uint16_t>(channels)});
  }
  for (int e = 0; e < kNumEngines; ++e) {
    if (learners[e]) learners[e]->apply_round(rounds[e]);
  }
}

// The ranks' decision hashes differ: find the first call they decided differently (every rank
// gathers every rank's decisions of the round) and fail the group on every rank, naming it.
// Decisions are kept for the round's K calls; the hash may cover earlier calls of skipped rounds.
void Consensus::fail_on_disagreement() {
  const uint64_t first = pending_.first;
  at::Tensor mine = at::empty({k_ * kRecordWords}, at::kDouble);
  for (int i = 0; i < k_; ++i) {
    write_record(mine.data_ptr<double>() + i * kRecordWords,
                 records_[(first + static_cast<uint64_t>(i)) % records_.size()]);
  }
  std::ostringstream msg;
  msg << "dynamiccl: the ranks of this group decided differently";
  bool named = false;
  try {
    const std::vector<at::Tensor> rows = transport_.allgather(mine);
    const int n = static_cast<int>(rows.size());
    for (int i = 0; i < k_; ++i) {
      const double* row0 = rows[0].data_ptr<double>() + i * kRecordWords;
      bool differs = false;
      for (int r = 1; r < n && !differs; ++r) {
        differs = !std::equal(row0, row0 + kRecordWords,
                              rows[r].data_ptr<double>() + i * kRecordWords);
      }
      if (!differs) continue;
      named = true;
      msg << " at learned call " << first + static_cast<uint64_t>(i) << ":";
      for (int r = 0; r < n; ++r) {
        msg << "\n  rank " << r << ": "
            << describe_record(rows[r].data_ptr<double>() + i * kRecordWords);
      }
      break;
    }
    if (!named && pending_.hash_from < first) {
      msg << " between learned calls " << pending_.hash_from << " and " << first - 1
          << " (rounds that measured nothing were skipped; the decisions of those calls are "
             "no longer kept)";
    }
  } catch (const std::exception&) {
    msg << " (their decisions could not be gathered)";
  }
  msg << "\nThe settings that shape decisions (DYNAMICCL_* variables, options, loaded policies) "
         "and the hints (dynamiccl_pg.hint, framework annotations) must be the same on every "
         "rank. The group stops here rather than run mismatched schedules.";
  failure_ = msg.str();
  C10_THROW_ERROR(DistBackendError, failure_);
}

void Consensus::end_step(int64_t now) {
  std::lock_guard<std::mutex> lock(signal_mu_);
  const double us = last_step_ns_ > 0 ? static_cast<double>(now - last_step_ns_) / 1e3 : NAN;
  last_step_ns_ = now;
  ++steps_ended_;
  step_times_us_.push_back(us);
  if (step_times_us_.size() > static_cast<size_t>(4 * k_)) {
    step_times_us_.erase(step_times_us_.begin(), step_times_us_.end() - k_);
  }
  if (std::isnan(us)) return;
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
    if (pending_.future) pending_.future->wait();
  } catch (...) {
  }
  pending_.future.reset();
}

}  // namespace dynamiccl
