#include "policy/cusum.h"

#include <algorithm>

namespace dynamiccl {

bool Cusum::add(double cost, double mean, double sigma) {
  const double z = std::clamp((cost - mean) / sigma, -kMaxStep, kMaxStep);
  sum_ = std::max(0.0, sum_ + z - drift_);
  if (sum_ > threshold_) {
    sum_ = 0;
    return true;
  }
  return false;
}

}  // namespace dynamiccl
