#include "backend/round_aftermath.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dynamiccl {

namespace {

// A lap counts at most this many times its state's usual one: a stall of the machine that hits
// one call is not a round's doing, and must not drag the usual lap along.
constexpr double kOutlierRatio = 4.0;
// The usual lap follows the state's calls with this gain (about the last 16 of them).
constexpr double kUsualGain = 1.0 / 16;

}  // namespace

RoundAftermath::RoundAftermath(int round_calls) : k_(static_cast<uint64_t>(round_calls)) {
  if (round_calls < 1) {
    throw std::invalid_argument("round_calls=" + std::to_string(round_calls) + " (accepted: >= 1)");
  }
}

void RoundAftermath::boundary(uint64_t next, const std::vector<CallRecord>& records, bool applied,
                              int64_t completed_ns, double apply_us, bool started) {
  // The laps known since the last boundary: of calls next-K-1 .. next-2 (the last call's lap
  // ends at the next call's issue). The first holds the last boundary's work.
  if (next > k_) {
    const uint64_t first = next - k_ - 1;
    const bool beside = started_before_ && applied;  // the round started there, applied now
    double excess_ns = 0;
    bool tail_taken = false;  // the lap of the first call issued after the all-reduce completed
    for (uint64_t i = first; i + 1 < next; ++i) {
      const CallRecord& rec = records[i % records.size()];
      const int64_t lap = records[(i + 1) % records.size()].start_ns - rec.start_ns;
      const bool at_boundary = i == first;
      bool in_aftermath = false;
      if (beside && (at_boundary || rec.start_ns < completed_ns)) {
        in_aftermath = true;
      } else if (beside && !tail_taken) {
        in_aftermath = tail_taken = true;
      }
      // A probe's own extra is charged to it, and the call after one starts with its skew.
      if (rec.engine != EngineKind::kCpu || rec.probe || rec.after_probe || lap <= 0) continue;
      if (rec.state_id >= usual_ns_.size()) usual_ns_.resize(rec.state_id + 1, 0.0);
      double& usual = usual_ns_[rec.state_id];
      if (in_aftermath) {
        if (usual <= 0) continue;
        const double own = at_boundary ? lap - applied_before_us_ * 1e3 : lap;
        excess_ns += std::min(own, kOutlierRatio * usual) - usual;
      } else if (!(at_boundary && busy_before_)) {  // a lap holding a round's work is not usual
        usual = usual > 0
                    ? usual + (std::min<double>(lap, kOutlierRatio * usual) - usual) * kUsualGain
                    : static_cast<double>(lap);
      }
    }
    if (beside) {
      sample_sum_us_ += excess_ns / 1e3 + apply_us;
      ++samples_;
    }
  }
  started_before_ = started;
  busy_before_ = applied || started;
  applied_before_us_ = applied ? apply_us : 0.0;
}

double RoundAftermath::take_sample() {
  if (samples_ == 0) return NAN;
  const double mean = sample_sum_us_ / samples_;
  sample_sum_us_ = 0;
  samples_ = 0;
  return mean;
}

}  // namespace dynamiccl
