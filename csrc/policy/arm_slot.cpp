#include "policy/arm_slot.h"

#include <algorithm>
#include <array>

namespace dynamiccl {

void ArmSlot::add(float cost_us) {
  stats.add(cost_us);
  window.push(cost_us);
  lowest = std::min(lowest, cost_us);
  if (cost_us > view.outlier_hi) ++outliers;
  trimmed.add(view.winsorized(cost_us));
  ++unsummarized;
  waited = 0;
  dirty = true;
}

void ArmSlot::refresh() {
  ArmView& v = view;
  // The window's order statistics move slowly once it holds only part of a long regime: they
  // are recomputed every kSummaryEvery costs then, every time before.
  const bool whole_regime = static_cast<uint64_t>(window.size()) >= stats.count();
  if (whole_regime || unsummarized >= kSummaryEvery) {
    const RobustSummary r = window.summary_recent(window.size());
    unsummarized = 0;
    if (r.n >= kMinRobustWindow) {
      v.robust_sigma = std::max(kMadToSigma * r.mad, kMinRelSpread * std::fabs(r.median));
      v.clip_lo = r.median - kClipSpreads * v.robust_sigma;
      v.clip_hi = r.median + kClipSpreads * v.robust_sigma;
      v.outlier_hi = r.median + kOutlierSpreads * v.robust_sigma;
    } else {
      v.robust_sigma = 0;  // set from the spread below
      v.clip_lo = -INFINITY;
      v.clip_hi = INFINITY;
      v.outlier_hi = INFINITY;
    }
    // The worst recent cost that is not an outlier: what a challenger's cheapest cost must exceed
    // to be hopeless. The tail itself is accounted for by the number of costs that elimination
    // rests on (PolicyState::update_tail); against the raw worst, one slow call of the incumbent
    // would keep every challenger alive.
    double regular = -INFINITY;
    for (int i = 0; i < r.n; ++i) {
      const double x = window.recent(i);
      if (x <= v.outlier_hi) regular = std::max(regular, x);
    }
    v.highest_regular = r.n > 0 ? regular : INFINITY;
    if (whole_regime && r.n > 0) {
      // Winsorize every cost of the regime with the bounds just found, so that an outlier among
      // the first costs does not stay in the centre.
      trimmed.reset();
      outliers = 0;
      for (int i = r.n - 1; i >= 0; --i) {
        const double x = window.recent(i);
        outliers += x > v.outlier_hi;
        trimmed.add(v.winsorized(x));
      }
    }
  }
  v.n = trimmed.count();
  v.center = trimmed.mean();
  v.spread = std::max(trimmed.stddev(), kMinRelSpread * std::fabs(v.center));
  if (!(v.robust_sigma > 0)) v.robust_sigma = v.spread;
  v.half_width = v.n < 2 ? INFINITY : kConfidenceZ * v.spread / std::sqrt(static_cast<double>(v.n));
  dirty = false;
}

void ArmSlot::clear_regime() {
  stats.reset();
  trimmed.reset();
  window.clear();
  view = ArmView{};
  lowest = INFINITY;
  outliers = 0;
  unsummarized = 0;
  issued = 0;
  fresh = 0;
  eliminated = false;
  resolved = false;
  waited = 0;
  dirty = false;
}

void ArmSlot::restart_regime(int keep_recent) {
  keep_recent = std::min(std::max(keep_recent, 0), window.size());
  std::array<float, SampleWindow::kCapacity> kept;
  for (int i = 0; i < keep_recent; ++i) kept[i] = window.recent(keep_recent - 1 - i);
  clear_regime();
  for (int i = 0; i < keep_recent; ++i) add(kept[i]);
  issued = static_cast<uint32_t>(keep_recent);
  refresh();
}

}  // namespace dynamiccl
