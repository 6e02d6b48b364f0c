#include "policy/cusum.h"

#include <algorithm>

namespace dynamiccl {

Cusum::Alarm Cusum::add(double cost, double center, double sigma, double threshold_scale) {
  // The upward sum reads the cheapest of the last three costs, the downward one the dearest: a
  // sustained shift passes two costs late, while outliers (slow calls, which hit every arm) reach
  // the upward sum only three in a row, and never make the downward one fire.
  double lo = cost, hi = cost;
  for (int i = 0; i < held_; ++i) {
    lo = std::min<double>(lo, last_[i]);
    hi = std::max<double>(hi, last_[i]);
  }
  if (held_ < 2) lo = hi = center;  // too few costs for the filter yet: no evidence either way
  last_[1] = last_[0];
  last_[0] = static_cast<float>(cost);
  held_ = std::min(held_ + 1, 2);

  const double z_up = std::clamp((lo - center) / sigma, -kClipSpreads, kClipSpreads);
  const double z_down = std::clamp((hi - center) / sigma, -kClipSpreads, kClipSpreads);
  up_ = std::max(0.0, up_ + z_up - drift_);
  down_ = std::max(0.0, down_ - z_down - drift_);
  run_up_ = up_ > 0 ? run_up_ + 1 : 0;
  run_down_ = down_ > 0 ? run_down_ + 1 : 0;
  const double level = threshold_ * threshold_scale;
  // Symmetric: a cheaper incumbent may mean the default, left for a congestion, is back.
  const Alarm alarm = up_ > level ? Alarm::kUp : down_ > level ? Alarm::kDown : Alarm::kNone;
  if (alarm != Alarm::kNone) {
    run_ = alarm == Alarm::kUp ? run_up_ : run_down_;
    up_ = down_ = 0;
    run_up_ = run_down_ = 0;
    held_ = 0;
  }
  return alarm;
}

}  // namespace dynamiccl
