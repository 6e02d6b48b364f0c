// Cost statistics primitives: a running mean/variance (Welford) and a small ring of the most
// recent samples with its order statistics (median, MAD, extremes), from which a learner state
// takes the robust view it compares arms by (arm_slot.h).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace dynamiccl {

// Welford's online mean and sum of squared deviations: numerically stable, O(1) per sample and
// fully described by (count, mean, m2), which is exactly what a policy snapshot stores.
class RunningStats {
 public:
  void add(double x) {
    ++n_;
    const double d = x - mean_;
    mean_ += d / static_cast<double>(n_);
    m2_ += d * (x - mean_);
  }
  void reset() { n_ = 0, mean_ = 0, m2_ = 0; }
  void assign(uint64_t n, double mean, double m2) {
    n_ = n;
    mean_ = n > 0 ? mean : 0;
    m2_ = n > 1 ? m2 : 0;
  }

  uint64_t count() const { return n_; }
  double mean() const { return mean_; }
  double m2() const { return m2_; }
  // Sample variance; 0 with fewer than two samples.
  double variance() const { return n_ > 1 ? m2_ / static_cast<double>(n_ - 1) : 0.0; }
  double stddev() const { return std::sqrt(variance()); }

 private:
  uint64_t n_ = 0;
  double mean_ = 0;
  double m2_ = 0;
};

// Order statistics of a set of samples.
struct RobustSummary {
  int n = 0;
  double median = 0;
  double mad = 0;  // median absolute deviation from the median (unscaled)
  double highest = 0;
};

// The last kCapacity samples; the oldest is overwritten first.
class SampleWindow {
 public:
  static constexpr int kCapacity = 32;

  void push(float x) {
    ring_[next_] = x;
    next_ = next_ + 1 == kCapacity ? 0 : next_ + 1;
    if (size_ < kCapacity) ++size_;
  }
  void clear() { next_ = 0, size_ = 0; }
  int size() const { return size_; }
  // The sample `back` positions before the newest (0 = the newest); back < size().
  float recent(int back) const {
    const int pos = next_ - 1 - back;
    return ring_[pos < 0 ? pos + kCapacity : pos];
  }
  // Median of the `k` most recent samples (k clamped to [0, size()]); 0 when there are none.
  // No allocation: it selects on a copy on the stack.
  double median_recent(int k) const;
  // Median, MAD and highest of the `k` most recent samples (k clamped as above); all zero
  // when there are none. No allocation.
  RobustSummary summary_recent(int k) const;

 private:
  std::array<float, kCapacity> ring_{};
  int next_ = 0;  // slot the next sample goes to
  int size_ = 0;
};

// Scale from the MAD to the standard deviation of a normal distribution: a MAD-based spread
// reads like a standard deviation on well-behaved data and ignores a minority of outliers.
constexpr double kMadToSigma = 1.4826;

}  // namespace dynamiccl
