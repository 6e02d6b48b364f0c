#include "truth/truth.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace dynamiccl {
namespace truth {

namespace {
constexpr double kP2pBaseUs = 5.0;  // fixed cost of one NCCL send/recv pair
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TruthFactors::TruthFactors() {
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      bw[a][p] = 1.0;
      lat[a][p] = 1.0;
    }
  }
}

TruthFactors TruthFactors::from_entries(const std::vector<TruthEntry>& entries) {
  TruthFactors f;
  for (const TruthEntry& e : entries) {
    int algo = -1, proto = -1;
    if (e.algo != kTruthWildcard && !parse_algo(e.algo, &algo))
      throw std::invalid_argument("truth: unknown algorithm '" + e.algo + "' (accepted: " +
                                  join_names(algo_names()) + ", " + kTruthWildcard + ")");
    if (e.proto != kTruthWildcard && !parse_proto(e.proto, &proto))
      throw std::invalid_argument("truth: unknown protocol '" + e.proto + "' (accepted: " +
                                  join_names(proto_names()) + ", " + kTruthWildcard + ")");
    if (!(e.bw > 0) || !std::isfinite(e.bw) || !(e.lat > 0) || !std::isfinite(e.lat))
      throw std::invalid_argument("truth: '" + e.algo + "/" + e.proto +
                                  "' multipliers must be finite and > 0");
    for (int a = 0; a < kNumAlgos; ++a) {
      if (algo >= 0 && a != algo) continue;
      for (int p = 0; p < kNumProtos; ++p) {
        if (proto >= 0 && p != proto) continue;
        f.bw[a][p] *= e.bw;
        f.lat[a][p] *= e.lat;
      }
    }
  }
  return f;
}

bool TruthFactors::identity() const {
  for (int a = 0; a < kNumAlgos; ++a)
    for (int p = 0; p < kNumProtos; ++p)
      if (bw[a][p] != 1.0 || lat[a][p] != 1.0) return false;
  return true;
}

GroupWorld::GroupWorld(const Topology& topo, const GroupShape& shape, const TruthFactors& truth,
                       const ChannelModelSpec& channels)
    : topo_(topo),
      shape_(shape),
      factors_(truth),
      channels_(channels),
      nominal_(derive_comm_inputs(topo, shape)),
      truth_(nominal_),
      p2p_truth_(p2p_for(LinkScale())) {
  if (!(channels.saturation > 0 && channels.saturation <= 1))
    throw std::invalid_argument("channel_model.saturation must be in (0, 1]");
  if (!(channels.contention >= 0 && channels.contention < 1))
    throw std::invalid_argument("channel_model.contention must be in [0, 1)");
  if (!(channels.lat_per_channel_us >= 0) || !std::isfinite(channels.lat_per_channel_us))
    throw std::invalid_argument("channel_model.lat_per_channel_us must be >= 0");
}

P2pModel GroupWorld::p2p_for(const LinkScale& s) const {
  P2pModel m;
  if (shape_.nodes > 1) {
    m.lat_us = kP2pBaseUs + topo_.inter_lat * s.inter_lat;
    m.bw_GBps = topo_.inter_bw * s.inter_bw;
  } else {
    m.lat_us = kP2pBaseUs + topo_.intra_lat * s.intra_lat;
    m.bw_GBps = topo_.intra_bw * s.intra_bw;
  }
  return m;
}

void GroupWorld::set_link_scale(const LinkScale& scale) {
  if (scale == scale_) return;
  scale_ = scale;
  truth_ = NcclCostModel(derive_comm_inputs(topo_, shape_, scale));
  p2p_truth_ = p2p_for(scale);
}

bool GroupWorld::default_pick(OpKind op, uint64_t bytes, int* algo, int* proto) const {
  const int f = func_of(op);
  if (f < 0) return false;
  return nominal_.pick(f, bytes, algo, proto);
}

double GroupWorld::truth_us(OpKind op, const Action& act, uint64_t bytes) const {
  const int f = func_of(op);
  if (f < 0) return p2p_truth_.time_us(bytes);
  int a = act.algo, p = act.proto;
  if (act.is_default() && !nominal_.pick(f, bytes, &a, &p)) return kInf;
  if (a < 0 || a >= kNumAlgos || p < 0 || p >= kNumProtos) return kInf;
  ModelTerms t;
  if (!truth_.terms(f, a, p, bytes, &t)) return kInf;
  // Bandwidth grows with channels up to the knee (the link is then full), channels past the
  // knee only contend for it, and every channel used costs a fixed latency.
  const int n = truth_.graph_channels(a);
  const int c = act.channels > 0 ? std::min<int>(act.channels, n) : n;
  const double knee = channels_.saturation * n;
  const double chan_share = std::min<double>(c, knee) / knee *
                            (1.0 - channels_.contention * std::max(0.0, c - knee) / n);
  const double lat = t.lat_us * factors_.lat[a][p] +
                     channels_.lat_per_channel_us * truth_.channels_used(a, p, bytes, c);
  const double bw = t.bw_GBps * factors_.bw[a][p] * chan_share;
  const double time_us = lat + static_cast<double>(bytes) / (1000.0 * bw);
  if (act.chunk_bytes <= 0) return time_us;  // NCCL's chunk: exactly the chunk-less truth
  // A chunk size (NCCL >= 2.30) changes the pipelining as the cost model says, at this truth's
  // bandwidth.
  return time_us + NcclCostModel::chunk_delta_us(p, act.chunk_bytes, bytes, c, n,
                                                 t.bw_GBps * factors_.bw[a][p],
                                                 truth_.inputs().n_ranks - 1);
}

}  // namespace truth
}  // namespace dynamiccl
