#include "policy/round_scheduler.h"

#include <stdexcept>
#include <string>

namespace dynamiccl {

int round_exchanges(int ranks) {
  if (ranks <= 1) return 0;
  int p2 = 1, exchanges = 0;
  while (p2 * 2 <= ranks) {
    p2 *= 2;
    ++exchanges;
  }
  return exchanges + (p2 == ranks ? 0 : 2);
}

RoundScheduler::RoundScheduler(int round_calls) : k_(round_calls) {
  if (round_calls < 1) {
    throw std::invalid_argument("round_calls=" + std::to_string(round_calls) + " (accepted: >= 1)");
  }
}

RoundScheduler::Boundary RoundScheduler::end_call() {
  Boundary b;
  if (next_ % static_cast<uint64_t>(k_) != 0) return b;
  b.at = true;
  b.apply = in_flight_;
  unchecked_ += static_cast<uint64_t>(k_);
  b.start = measured_in_round_ > 0 || unchecked_ >= kAgreementCalls;
  if (b.start) unchecked_ = 0;
  b.first = next_ - static_cast<uint64_t>(k_);
  applied_ += b.apply ? 1 : 0;
  started_ += b.start ? 1 : 0;
  in_flight_ = b.start;
  measured_in_round_ = 0;
  return b;
}

}  // namespace dynamiccl
