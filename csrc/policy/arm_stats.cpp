#include "policy/arm_stats.h"

#include <algorithm>

namespace dynamiccl {

namespace {

// Median of v[0..k) by selection, in linear time (reorders v): this runs once per arm and round.
double select_median(float* v, int k) {
  std::nth_element(v, v + k / 2, v + k);
  if (k % 2 == 1) return v[k / 2];
  const float below = *std::max_element(v, v + k / 2);
  return 0.5 * (static_cast<double>(below) + v[k / 2]);
}

}  // namespace

double SampleWindow::median_recent(int k) const {
  k = std::min(std::max(k, 0), size_);
  if (k == 0) return 0.0;
  std::array<float, kCapacity> tmp;
  for (int i = 0; i < k; ++i) tmp[i] = recent(i);
  return select_median(tmp.data(), k);
}

RobustSummary SampleWindow::summary_recent(int k) const {
  RobustSummary s;
  k = std::min(std::max(k, 0), size_);
  if (k == 0) return s;
  std::array<float, kCapacity> tmp;
  float hi = recent(0);
  for (int i = 0; i < k; ++i) {
    tmp[i] = recent(i);
    hi = std::max(hi, tmp[i]);
  }
  s.n = k;
  s.highest = hi;
  s.median = select_median(tmp.data(), k);
  for (int i = 0; i < k; ++i) tmp[i] = static_cast<float>(std::fabs(tmp[i] - s.median));
  s.mad = select_median(tmp.data(), k);
  return s;
}

}  // namespace dynamiccl
