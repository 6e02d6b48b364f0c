// The simulated world of one process group: NCCL's nominal model (what NCCL believes, hence
// what it picks by default) and the truth (what a call really costs): the same model fed with
// the links as congestion left them, then perturbed per algorithm/protocol and per channel
// count by the scenario. With no perturbation and no congestion the two agree exactly, so
// NCCL's default is then optimal among uncapped arms.
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.h"
#include "nccl_model/cost_model.h"
#include "nccl_model/topology.h"
#include "truth/truth_spec.h"

namespace dynamiccl {
namespace truth {

// The truth is built on NCCL's cost model: its names are the truth model's.
using namespace nccl;

// Per (algo, proto) multipliers: every matching TruthEntry multiplies in.
struct TruthFactors {
  double bw[kNumAlgos][kNumProtos];
  double lat[kNumAlgos][kNumProtos];
  TruthFactors();
  // Throws std::invalid_argument naming an unknown algorithm/protocol or a bad factor.
  static TruthFactors from_entries(const std::vector<TruthEntry>& entries);
  bool identity() const;
};

// Point-to-point traffic (pipeline sends) never reaches NCCL's tuner: one arm, costed as a
// single hop over the link class the two ranks share.
struct P2pModel {
  double lat_us = 0;
  double bw_GBps = 1;
  double time_us(uint64_t bytes) const {
    return lat_us + static_cast<double>(bytes) / (1000.0 * bw_GBps);
  }
};

class GroupWorld {
 public:
  GroupWorld(const Topology& topo, const GroupShape& shape, const TruthFactors& truth,
             const ChannelModelSpec& channels);

  const GroupShape& shape() const { return shape_; }
  const NcclCostModel& nominal() const { return nominal_; }
  const NcclCostModel& truth_model() const { return truth_; }
  // Rebuilds the truth for links scaled by a congestion state.
  void set_link_scale(const LinkScale& scale);
  const LinkScale& link_scale() const { return scale_; }

  // The real cost of an action (the default action = NCCL's own pick). +inf = unavailable.
  double truth_us(OpKind op, const Action& a, uint64_t bytes) const;
  // NCCL's pick for a tuner op; false for ops the tuner never sees.
  bool default_pick(OpKind op, uint64_t bytes, int* algo, int* proto) const;

 private:
  Topology topo_;
  GroupShape shape_;
  TruthFactors factors_;
  ChannelModelSpec channels_;
  LinkScale scale_;
  NcclCostModel nominal_;
  NcclCostModel truth_;
  P2pModel p2p_truth_;
  P2pModel p2p_for(const LinkScale& s) const;
};

}  // namespace truth
}  // namespace dynamiccl
