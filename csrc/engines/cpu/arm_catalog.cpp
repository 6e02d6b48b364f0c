#include "engines/cpu/arm_catalog.h"

#include <string>

#include "engines/cpu/schedule.h"

namespace dynamiccl {

namespace {

// The default arm is priced as what Gloo runs itself: ring-based all-reduce, all-gather and
// reduce-scatter, tree-like broadcast and reduce, direct exchanges for the rest.
double native_prior_us(OpKind op, const CostShape& g, double n) {
  const CpuSchedule* like = nullptr;
  switch (op) {
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: like = &ring_schedule(); break;
    case OpKind::kBroadcast:
    case OpKind::kReduce: like = &tree_schedule(); break;
    case OpKind::kAllToAll:
    case OpKind::kGather:
    case OpKind::kScatter: return (g.p - 1) * kAlphaUs + (g.p - 1.0) / g.p * n * kBetaUsPerByte;
    case OpKind::kBarrier: return 2 * g.ceil_log2p * kAlphaUs;
    default: return kAlphaUs + n * kBetaUsPerByte;  // send / recv
  }
  return like->find(op)->prior_us(g, n, 1);
}

}  // namespace

CpuArmCatalog::CpuArmCatalog() {
  const auto& schedules = cpu_schedules();
  for (int o = 0; o < kNumOps; ++o) {
    std::vector<Arm>& list = arms_[o];
    list.push_back(Arm{"default", Action{}});
    for (size_t s = 0; s < schedules.size(); ++s) {
      const CpuSchedule::Op* entry = schedules[s]->find(static_cast<OpKind>(o));
      if (entry == nullptr) continue;
      for (int segments : entry->segments) {
        Arm a;
        a.name = schedules[s]->name;
        if (segments > 1) a.name += "_s" + std::to_string(segments);
        a.action.algo = static_cast<int8_t>(s);
        a.action.channels = static_cast<int16_t>(segments);
        list.push_back(std::move(a));
      }
    }
  }
}

const std::vector<Arm>& CpuArmCatalog::arms(OpKind op) const { return arms_[static_cast<int>(op)]; }

double CpuArmCatalog::prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                                    int group_size) const {
  if (group_size < 2) return 0.0;
  const CostShape g(group_size);
  const double n = static_cast<double>(effective_bytes);
  const Action& a = arms(op).at(arm).action;
  if (a.is_default()) return native_prior_us(op, g, n);
  return cpu_schedules()[a.algo]->find(op)->prior_us(g, n, a.channels);
}

}  // namespace dynamiccl
