#include "sim/sim_arm_catalog.h"

#include <algorithm>
#include <limits>

namespace dynamiccl {
namespace sim {

std::string arm_name(int algo, int proto, int cap) {
  std::string s = std::string(algo_name(algo)) + "/" + proto_name(proto);
  if (cap > 0) s += "/c" + std::to_string(cap);
  return s;
}

SimArmCatalog::SimArmCatalog(std::shared_ptr<const GroupWorld> world, std::vector<int> caps,
                             bool derive_caps)
    : world_(std::move(world)) {
  const NcclCostModel& m = world_->nominal();
  const int nch = m.graph_channels(kAlgoRing);
  if (caps.empty() && derive_caps) caps = {nch / 4, nch / 2};
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  for (int c : caps)
    if (c >= 1) caps_.push_back(c);

  for (int o = 0; o < kNumOps; ++o) {
    std::vector<Arm>& list = arms_[o];
    list.push_back(Arm{"default", Action{}});
    const int f = func_of(static_cast<OpKind>(o));
    if (f < 0) continue;  // not tunable through NCCL's tuner
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        if (!m.available(f, a, p)) continue;
        list.push_back(Arm{arm_name(a, p, 0),
                           Action{static_cast<int8_t>(a), static_cast<int8_t>(p), -1}});
        for (int c : caps_) {
          // LL moves a few bytes per flag: latency-bound, its channel count hardly matters.
          if (p == kProtoLL || c >= m.graph_channels(a)) continue;
          list.push_back(Arm{arm_name(a, p, c), Action{static_cast<int8_t>(a),
                                                       static_cast<int8_t>(p),
                                                       static_cast<int16_t>(c)}});
        }
      }
    }
  }
}

const std::vector<Arm>& SimArmCatalog::arms(OpKind op) const {
  return arms_[static_cast<int>(op)];
}

double SimArmCatalog::prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                                    int /*group_size: fixed for this group's catalog*/) const {
  const std::vector<Arm>& list = arms(op);
  if (arm >= list.size()) return std::numeric_limits<double>::max();
  const double t = world_->nominal_us(op, list[arm].action, effective_bytes);
  return t < 0 ? std::numeric_limits<double>::max() : t;
}

}  // namespace sim
}  // namespace dynamiccl
