#include "policy/arm_stats.h"

#include <algorithm>

namespace dynamiccl {

double SampleWindow::median_recent(int k) const {
  k = std::min(std::max(k, 0), size_);
  if (k == 0) return 0.0;
  std::array<float, kCapacity> tmp;
  int pos = next_;
  for (int i = 0; i < k; ++i) {  // walk backwards from the newest sample
    pos = pos == 0 ? kCapacity - 1 : pos - 1;
    tmp[i] = ring_[pos];
  }
  std::sort(tmp.begin(), tmp.begin() + k);
  return k % 2 == 1 ? tmp[k / 2] : 0.5 * (static_cast<double>(tmp[k / 2 - 1]) + tmp[k / 2]);
}

}  // namespace dynamiccl
