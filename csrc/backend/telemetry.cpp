#include "backend/telemetry.h"

namespace dynamiccl {

namespace {
template <typename T>
uint64_t fnv1a(uint64_t h, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    h ^= static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
    h *= 1099511628211ull;
  }
  return h;
}
}  // namespace

Telemetry::Telemetry(size_t log_capacity, bool trace)
    : log_capacity_(log_capacity), trace_(trace) {
  log_.reserve(log_capacity);  // the ring is allocated once; logging never allocates
}

uint64_t hash_decision(uint64_t h, const CallRecord& r) {
  h = fnv1a(h, r.seq);
  h = fnv1a(h, static_cast<uint8_t>(r.op));
  h = fnv1a(h, r.bytes);
  h = fnv1a(h, static_cast<uint8_t>(r.role));
  h = fnv1a(h, r.state_id);
  h = fnv1a(h, r.arm);
  return fnv1a(h, r.epoch);
}

void Telemetry::log_decision(const CallRecord& e) {
  hash_ = hash_decision(hash_, e);
  if (log_capacity_ > 0) {
    if (log_.size() < log_capacity_) {
      log_.push_back(e);
    } else {
      log_[logged_ % log_capacity_] = e;
    }
  }
  ++logged_;
}

std::vector<CallRecord> Telemetry::decision_log() const {
  if (log_.size() < log_capacity_ || log_capacity_ == 0) return log_;
  std::vector<CallRecord> out;
  out.reserve(log_.size());
  const size_t start = logged_ % log_capacity_;
  for (size_t i = 0; i < log_.size(); ++i) out.push_back(log_[(start + i) % log_capacity_]);
  return out;
}

TracedCall& Telemetry::add_trace(const CallRecord& r) {
  TracedCall& t = traces_.emplace_back();
  t.record = r;
  return t;
}

}  // namespace dynamiccl
