// What a cluster really costs, as a scenario describes it: the truth's departures from NCCL's
// model per algorithm and protocol, how cost depends on the channel count, and the noise of one
// rank's call. Read by the simulator (csrc/sim) and the emulated NCCL engine alike; the scenario
// schema (sim/scenario_schema.cpp) declares each field's meaning, unit and range for files.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_model/topology.h"
#include "truth/rng.h"

namespace dynamiccl {
namespace truth {

// Truth multipliers for one algorithm/protocol pair.
constexpr const char kTruthWildcard[] = "*";  // as algo or proto: every value
struct TruthEntry {
  std::string algo = kTruthWildcard;
  std::string proto = kTruthWildcard;
  double bw = 1.0;
  double lat = 1.0;
};

// How the real cost depends on the channel count; the defaults are NCCL's assumption.
struct ChannelModelSpec {
  double saturation = 1.0;
  double contention = 0.0;
  double lat_per_channel_us = 0.0;
};

// One rank's multiplicative noise on a call's cost: log-normal with mean 1, times
// `outlier_factor` with probability `outlier_rate` (a heavy tail that hits whatever arm runs).
struct NoiseSpec {
  double sigma = 0.0;
  double outlier_rate = 0.0;
  double outlier_factor = 5.0;
  double sample(Rng& rng) const {
    double n = sigma > 0 ? std::exp(sigma * rng.normal() - 0.5 * sigma * sigma) : 1.0;
    if (outlier_rate > 0 && rng.uniform() < outlier_rate) n *= outlier_factor;
    return n;
  }
};

// A cluster as the truth model needs it.
struct ClusterTruth {
  nccl::TopologySpec topology;
  std::vector<TruthEntry> truth;
  ChannelModelSpec channel_model;
  NoiseSpec noise;
  uint64_t seed = 1;
};

}  // namespace truth
}  // namespace dynamiccl
