#include "backend/telemetry.h"

namespace dynamiccl {

namespace {
// One 64-bit word into the hash: xor, then the splitmix64 finalizer (every input bit reaches
// every output bit). A word at a time, not FNV's byte at a time: this runs on every learned call.
uint64_t mix(uint64_t h, uint64_t word) {
  h ^= word;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}
}  // namespace

Telemetry::Telemetry(size_t log_capacity, bool trace) : log_capacity_(log_capacity), trace_(trace) {
  log_.reserve(log_capacity);  // the ring is allocated once; logging never allocates
}

uint64_t hash_decision(uint64_t h, const CallRecord& r) {
  h = mix(h, r.seq);
  h = mix(h, r.bytes);
  h = mix(h, static_cast<uint64_t>(r.state_id) << 32 | r.epoch);
  return mix(h, static_cast<uint64_t>(r.arm) << 16 |
                    static_cast<uint64_t>(static_cast<uint8_t>(r.op)) << 8 |
                    static_cast<uint8_t>(r.role));
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
