#include "engines/nccl/arm_catalog.h"

#include <cmath>
#include <string>

#include "nccl_plugin/dynamiccl_nccl.h"
#include "sim/sim_arm_catalog.h"

namespace dynamiccl {

namespace {

Arm make_arm(int algo, int proto, int channels) {
  Arm a;
  a.name = sim::arm_name(algo, proto, channels);
  a.action.algo = static_cast<int8_t>(algo);
  a.action.proto = static_cast<int8_t>(proto);
  a.action.channels = static_cast<int16_t>(channels);
  return a;
}

}  // namespace

NcclArmCatalog::NcclArmCatalog() {
  // Which (collective, algorithm, protocol) NCCL models (research: tuning.cc pairs): Broadcast and
  // Reduce ring only; AllGather/ReduceScatter ring and PAT (Simple); AllReduce ring and tree with
  // every protocol, NVLS (Simple). Arms NCCL marks unavailable on a communicator are dropped by the
  // learner for that state, on every rank, the first time the plugin reports them.
  const int R = DYNAMICCL_NCCL_ALGO_RING, T = DYNAMICCL_NCCL_ALGO_TREE;
  const int LL = DYNAMICCL_NCCL_PROTO_LL, LL128 = DYNAMICCL_NCCL_PROTO_LL128,
            S = DYNAMICCL_NCCL_PROTO_SIMPLE;
  for (int o = 0; o < kNumOps; ++o) {
    auto& v = arms_[o];
    v.push_back(Arm{"default", Action{}});
    const auto op = static_cast<OpKind>(o);
    if (sim::func_of(op) < 0) continue;
    for (int p : {LL, LL128, S}) v.push_back(make_arm(R, p, -1));
    if (op == OpKind::kAllReduce) {
      for (int p : {LL, LL128, S}) v.push_back(make_arm(T, p, -1));
      v.push_back(make_arm(DYNAMICCL_NCCL_ALGO_NVLS, S, -1));
    }
    if (op == OpKind::kAllGather || op == OpKind::kReduceScatter) {
      v.push_back(make_arm(DYNAMICCL_NCCL_ALGO_PAT, S, -1));
    }
    // Channel caps: fewer SMs for communication, which can win under compute overlap.
    for (int ch : {4, 16}) v.push_back(make_arm(R, S, ch));
  }
}

const std::vector<Arm>& NcclArmCatalog::arms(OpKind op) const {
  return arms_[static_cast<int>(op)];
}

double NcclArmCatalog::prior_cost_us(OpKind op, uint16_t arm, uint64_t bytes,
                                     int group_size) const {
  // A coarse latency/bandwidth model, only to order probing: LL has the lowest latency and a
  // fraction of the bandwidth, Simple the reverse; tree's latency grows with log2(ranks), ring's
  // with ranks. The default arm is never probed, so its prior does not matter.
  const Action& a = arms_[static_cast<int>(op)][arm].action;
  if (a.is_default()) return 0;
  static const double kLatUs[] = {0.6, 1.1, 4.0};    // LL, LL128, Simple per step
  static const double kBwFrac[] = {0.45, 0.92, 1.0};
  const int p = a.proto < 0 ? 2 : a.proto;
  const double n = std::max(2, group_size);
  const double steps = a.algo == DYNAMICCL_NCCL_ALGO_TREE ? 2 * std::log2(n) : 2 * (n - 1);
  const double bw_GBps = 100.0 * kBwFrac[p] * (a.channels > 0 ? std::min(1.0, a.channels / 16.0) : 1);
  return steps * kLatUs[p] + static_cast<double>(bytes) / (bw_GBps * 1e3);
}

}  // namespace dynamiccl
