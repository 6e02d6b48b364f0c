#include "engines/nccl/arm_catalog.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace dynamiccl {

using namespace nccl;

std::string nccl_arm_name(int algo, int proto, int cap) {
  std::string s = std::string(algo_name(algo)) + "/" + proto_name(proto);
  if (cap > 0) s += "/c" + std::to_string(cap);
  return s;
}

bool parse_nccl_arm_name(const std::string& name, Action* action) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return false;
  const size_t cap_slash = name.find('/', slash + 1);
  const std::vector<std::string> algos = algo_names(), protos = proto_names();
  const auto algo = std::find(algos.begin(), algos.end(), name.substr(0, slash));
  const auto proto = std::find(protos.begin(), protos.end(),
                               name.substr(slash + 1, cap_slash - slash - 1));
  if (algo == algos.end() || proto == protos.end()) return false;
  int cap = -1;
  if (cap_slash != std::string::npos) {
    const std::string c = name.substr(cap_slash + 1);  // "cN"
    if (c.size() < 2 || c.size() > 3 || c[0] != 'c' ||
        c.find_first_not_of("0123456789", 1) != std::string::npos) {
      return false;
    }
    cap = std::stoi(c.substr(1));
    if (cap < 1 || cap > DYNAMICCL_NCCL_MAX_CHANNELS) return false;
  }
  *action = Action{static_cast<int8_t>(algo - algos.begin()),
                   static_cast<int8_t>(proto - protos.begin()), static_cast<int16_t>(cap)};
  return true;
}

NcclArmCatalog::NcclArmCatalog(NcclCostModel model, std::vector<int> caps, bool derive_caps)
    : model_(std::move(model)) {
  const int nch = model_.graph_channels(kAlgoRing);
  if (caps.empty() && derive_caps) caps = {nch / 4, nch / 2};
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  for (int c : caps) {
    if (c >= 1) caps_.push_back(c);
  }
  for (int o = 0; o < kNumOps; ++o) {
    std::vector<Arm>& list = arms_[o];
    list.push_back(Arm{"default", Action{}});
    const int f = func_of(static_cast<OpKind>(o));
    if (f < 0) continue;  // not tunable through NCCL's tuner
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        if (!model_.available(f, a, p)) continue;
        list.push_back(Arm{nccl_arm_name(a, p, 0),
                           Action{static_cast<int8_t>(a), static_cast<int8_t>(p), -1}});
        for (int c : caps_) {
          // LL moves a few bytes per flag: latency-bound, its channel count hardly matters.
          if (p == kProtoLL || c >= model_.graph_channels(a)) continue;
          list.push_back(
              Arm{nccl_arm_name(a, p, c),
                  Action{static_cast<int8_t>(a), static_cast<int8_t>(p), static_cast<int16_t>(c)}});
        }
      }
    }
  }
}

const std::vector<Arm>& NcclArmCatalog::arms(OpKind op) const {
  return arms_[static_cast<int>(op)];
}

double NcclArmCatalog::prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                                     int /*group_size: the model's communicator*/) const {
  const std::vector<Arm>& list = arms(op);
  if (arm >= list.size()) return std::numeric_limits<double>::max();
  if (func_of(op) < 0) return 0.0;  // one arm: nothing to order
  const double t = model_.predict_us(op, list[arm].action, effective_bytes);
  return t < 0 ? std::numeric_limits<double>::max() : t;
}

NcclArmCatalog nccl_catalog_for(const Topology& topology, const GroupShape& shape,
                                std::vector<int> caps, bool derive_caps) {
  return NcclArmCatalog(NcclCostModel(derive_comm_inputs(topology, shape)), std::move(caps),
                        derive_caps);
}

}  // namespace dynamiccl
