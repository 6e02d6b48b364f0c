// The "trigger agent": a two-sided CUSUM detector on the incumbent's cost, normalized by the
// incumbent's robust centre and spread. It raises an alarm when the incumbent's cost shifts for
// a sustained stretch: up (the incumbent became slower: another arm may now be better) or down
// (conditions eased, e.g. congestion ended: the arm that was best before may be back).
//
// Robust to heavy-tailed costs in three ways: the upward sum reads the cheapest of the last three
// costs and the downward one the dearest (a shift must persist to show, slow outliers reach the
// upward sum only three in a row), each input moves a sum by at most kClipSpreads spreads
// (winsorized), and the caller raises the threshold with the rate of outliers it has seen. The
// filters also take ~0.85 spreads off normal noise in each direction, on top of the drift.
#pragma once

#include <cstdint>

#include "policy/tuning.h"

namespace dynamiccl {

class Cusum {
 public:
  enum class Alarm : uint8_t { kNone = 0, kUp, kDown };

  // threshold: alarm level; drift: slack subtracted per sample (both in spreads).
  void configure(double threshold, double drift) {
    threshold_ = threshold;
    drift_ = drift;
  }
  // Forgets the sums and the filter's history.
  void reset() {
    up_ = down_ = 0;
    run_up_ = run_down_ = run_ = 0;
    held_ = 0;
  }
  // After an alarm: the costs the alarming sum spans, counted from when it last rested at zero
  // (where the change most likely began). Kept until reset().
  uint32_t run() const { return run_; }

  // Adds one cost against the reference level `center` and spread `sigma` (> 0) estimated before
  // it; the alarm level is threshold * threshold_scale. On an alarm both sums and the filter
  // restart; run() tells how many costs the evidence spans.
  Alarm add(double cost, double center, double sigma, double threshold_scale = 1.0);

 private:
  double threshold_ = 8.0;
  double drift_ = 0.5;
  double up_ = 0;    // evidence that the cost went up
  double down_ = 0;  // evidence that it went down
  uint32_t run_up_ = 0, run_down_ = 0, run_ = 0;
  float last_[2] = {0, 0};  // the two previous costs, newest first (the filter's window)
  int held_ = 0;            // how many of last_ are valid
};

}  // namespace dynamiccl
