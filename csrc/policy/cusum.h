// The "trigger agent": a one-sided CUSUM detector on the incumbent's cost, normalized by the
// incumbent's own mean and spread. It raises an alarm when the incumbent becomes slower for a
// sustained stretch. A cheaper incumbent is no reason to explore; that another arm became
// cheaper is what the runner-up re-check of the policy state detects.
#pragma once

namespace dynamiccl {

class Cusum {
 public:
  // A single sample moves the sum by at most this many standard deviations, so one outlier (a
  // preempted call, a page fault) cannot raise an alarm by itself.
  static constexpr double kMaxStep = 4.0;

  // threshold: alarm level; drift: slack subtracted per sample (both in std-devs).
  void configure(double threshold, double drift) {
    threshold_ = threshold;
    drift_ = drift;
  }
  void reset() { sum_ = 0; }
  double sum() const { return sum_; }

  // Adds one cost against the reference level `mean` and spread `sigma` (> 0) predicted before
  // it; true when the sum crosses the threshold (the sum then restarts from zero).
  bool add(double cost, double mean, double sigma);

 private:
  double threshold_ = 8.0;
  double drift_ = 0.5;
  double sum_ = 0;  // evidence that the cost went up
};

}  // namespace dynamiccl
