#include "backend/cpu_arm_catalog.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu_algorithms.h"

namespace dynamiccl {

namespace {

// Alpha-beta(-gamma) constants for Gloo over TCP on loopback or a LAN. They only order probing
// (the learner measures the real costs), so round numbers are enough.
constexpr double kAlphaUs = 30.0;                 // one message: syscalls, wake-ups, matching
constexpr double kPieceAlphaUs = 5.0;             // each extra piece of a segmented step
constexpr double kBetaUsPerByte = 1.0 / 1500.0;   // ~1.5 GB/s per link
constexpr double kGammaUsPerByte = 1.0 / 5000.0;  // ~5 GB/s ATen reduction

Arm make_arm(const char* name, CpuAlgo algo, int segments) {
  Arm a;
  a.name = name;
  a.action.algo = static_cast<int8_t>(algo);
  a.action.channels = static_cast<int16_t>(segments);
  return a;
}

struct Shape {
  explicit Shape(int size) : p(size) {
    while (p2 * 2 <= p) {
      p2 *= 2;
      ++log2p;
    }
    ceil_log2p = log2p + (p2 < p ? 1 : 0);
  }
  int p;
  int p2 = 1;
  int log2p = 0;
  int ceil_log2p = 0;
  bool folded() const { return p2 < p; }
};

// Latency of one step made of `s` pieces: the first costs a full message, the rest mostly
// overlap with it.
double lat(int s) { return kAlphaUs + (s - 1) * kPieceAlphaUs; }

// Each schedule's cost for n bytes; the reduction of all but the last piece overlaps with
// transfers, hence gamma / s.
double ring_allreduce(const Shape& g, double n, int s) {
  const double frac = (g.p - 1.0) / g.p;
  return 2 * (g.p - 1) * lat(s) + 2 * frac * n * kBetaUsPerByte + frac * n * kGammaUsPerByte / s;
}
double fold_cost(const Shape& g, double n_in, double n_out, int s, bool reduce) {
  if (!g.folded()) return 0.0;
  return 2 * lat(s) + (n_in + n_out) * kBetaUsPerByte + (reduce ? n_in * kGammaUsPerByte / s : 0);
}
double rd_allreduce(const Shape& g, double n, int s) {
  return fold_cost(g, n, n, s, true) +
         g.log2p * (lat(s) + n * kBetaUsPerByte + n * kGammaUsPerByte / s);
}
double hd_allreduce(const Shape& g, double n, int s) {
  const double frac = 1.0 - 1.0 / g.p2;
  return fold_cost(g, n, n, s, true) + 2 * g.log2p * lat(s) + 2 * frac * n * kBetaUsPerByte +
         frac * n * kGammaUsPerByte / s;
}
// Binomial tree: the root's link carries the message once per level whatever the
// segmentation; segments only overlap levels (after a fill of one piece per level).
double tree_phase(const Shape& g, double n, int s, bool reduce) {
  const double gamma = reduce ? kGammaUsPerByte : 0.0;
  const double fill =
      s > 1 ? (g.ceil_log2p - 1) * (kAlphaUs + n / s * (kBetaUsPerByte + gamma)) : 0.0;
  return g.ceil_log2p * (lat(s) + n * kBetaUsPerByte + n * gamma / s) + fill;
}
// Chain: every hop is a different link, so pieces pipeline for real.
double chain_phase(const Shape& g, double n, int s, bool reduce) {
  const double gamma = reduce ? kGammaUsPerByte : 0.0;
  return (g.p - 1 + s - 1) * (kAlphaUs + n / s * (kBetaUsPerByte + gamma));
}
// All-gather / reduce-scatter on n bytes of full buffer.
double ring_gather(const Shape& g, double n, int s, bool reduce) {
  const double frac = (g.p - 1.0) / g.p;
  return (g.p - 1) * lat(s) + frac * n * kBetaUsPerByte +
         (reduce ? frac * n * kGammaUsPerByte / s : 0.0);
}
double rd_gather(const Shape& g, double n, int s, bool reduce) {
  const double frac = 1.0 - 1.0 / g.p2;
  const double block = n / g.p;
  // Folding moves one block in and the whole buffer out (all-gather), or the whole buffer in
  // and one block out (reduce-scatter).
  const double fold = reduce ? fold_cost(g, n, block, s, true) : fold_cost(g, block, n, s, false);
  return fold + g.log2p * lat(s) + frac * n * kBetaUsPerByte +
         (reduce ? frac * n * kGammaUsPerByte / s : 0.0);
}

// Ops without schedules of our own: rough costs of Gloo's direct exchanges.
double native_other(OpKind op, const Shape& g, double n) {
  switch (op) {
    case OpKind::kAllToAll:
    case OpKind::kGather:
    case OpKind::kScatter: return (g.p - 1) * kAlphaUs + (g.p - 1.0) / g.p * n * kBetaUsPerByte;
    case OpKind::kBarrier: return 2 * g.ceil_log2p * kAlphaUs;
    default:  // send / recv
      return kAlphaUs + n * kBetaUsPerByte;
  }
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\n\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

CpuArmCatalog::CpuArmCatalog(int group_size) : group_size_(group_size) {
  // The same names on every group size, a single rank included (where every schedule is a
  // no-op), so one DYNAMICCL_FORCE value is valid for all the groups of a job.
  for (auto& list : arms_) list.push_back(Arm{"default", Action{}});
  auto& ar = arms_[static_cast<int>(OpKind::kAllReduce)];
  ar.push_back(make_arm("ring", CpuAlgo::kRing, 1));
  ar.push_back(make_arm("ring_s4", CpuAlgo::kRing, 4));
  ar.push_back(make_arm("rd", CpuAlgo::kRecursiveDoubling, 1));
  ar.push_back(make_arm("hd", CpuAlgo::kHalvingDoubling, 1));
  ar.push_back(make_arm("tree", CpuAlgo::kTree, 1));
  ar.push_back(make_arm("tree_s4", CpuAlgo::kTree, 4));
  for (OpKind op : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    auto& list = arms_[static_cast<int>(op)];
    list.push_back(make_arm("ring", CpuAlgo::kRing, 1));
    list.push_back(make_arm("ring_s4", CpuAlgo::kRing, 4));
    list.push_back(make_arm("rd", CpuAlgo::kRecursiveDoubling, 1));
  }
  for (OpKind op : {OpKind::kBroadcast, OpKind::kReduce}) {
    auto& list = arms_[static_cast<int>(op)];
    list.push_back(make_arm("tree", CpuAlgo::kTree, 1));
    list.push_back(make_arm("tree_s4", CpuAlgo::kTree, 4));
    list.push_back(make_arm("ring_s8", CpuAlgo::kRing, 8));
  }
}

const std::vector<Arm>& CpuArmCatalog::arms(OpKind op) const {
  const int i = static_cast<int>(op);
  return arms_[i >= 0 && i < kNumOps ? i : 0];
}

double CpuArmCatalog::prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                                    int group_size) const {
  if (group_size < 2) return 0.0;
  const Shape g(group_size);
  const double n = static_cast<double>(effective_bytes);
  const auto& list = arms(op);
  const Action a = arm < list.size() ? list[arm].action : Action{};
  const int s = std::max<int>(1, a.channels);
  // The default arm is costed as the algorithm Gloo itself runs for the op (ring-based for
  // all-reduce, all-gather and reduce-scatter; tree-like for broadcast and reduce).
  const auto algo = a.algo < 0 ? CpuAlgo::kNative : static_cast<CpuAlgo>(a.algo);
  switch (op) {
    case OpKind::kAllReduce:
      switch (algo) {
        case CpuAlgo::kRecursiveDoubling: return rd_allreduce(g, n, s);
        case CpuAlgo::kHalvingDoubling: return hd_allreduce(g, n, s);
        case CpuAlgo::kTree: return tree_phase(g, n, s, true) + tree_phase(g, n, s, false);
        default: return ring_allreduce(g, n, s);
      }
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: {
      const bool reduce = op == OpKind::kReduceScatter;
      return algo == CpuAlgo::kRecursiveDoubling ? rd_gather(g, n, s, reduce)
                                                 : ring_gather(g, n, s, reduce);
    }
    case OpKind::kBroadcast:
    case OpKind::kReduce: {
      const bool reduce = op == OpKind::kReduce;
      return algo == CpuAlgo::kRing ? chain_phase(g, n, s, reduce) : tree_phase(g, n, s, reduce);
    }
    default: return native_other(op, g, n);
  }
}

int CpuArmCatalog::find(OpKind op, const std::string& name) const {
  const auto& list = arms(op);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string CpuArmCatalog::arm_names(OpKind op) const {
  std::string out;
  for (const Arm& a : arms(op)) out += (out.empty() ? "" : ", ") + a.name;
  return out;
}

bool CpuArmCatalog::lookup(const std::string& entry, ForcedArm* out, std::string* error) const {
  const auto colon = entry.find(':');
  if (colon == std::string::npos) {
    *error = "DYNAMICCL_FORCE entry '" + entry + "' is not op:arm (e.g. allreduce:ring_s4)";
    return false;
  }
  const std::string op_str = trim(entry.substr(0, colon));
  const std::string arm_str = trim(entry.substr(colon + 1));
  OpKind op;
  if (!parse_op(op_str, &op)) {
    *error = "DYNAMICCL_FORCE: unknown op '" + op_str + "' (valid: " + join_names(op_names()) + ")";
    return false;
  }
  const int arm = find(op, arm_str);
  if (arm < 0) {
    *error = "DYNAMICCL_FORCE: unknown arm '" + arm_str + "' for " + op_str +
             " (valid: " + arm_names(op) + ")";
    return false;
  }
  out->op = op;
  out->arm = static_cast<uint16_t>(arm);
  return true;
}

bool CpuArmCatalog::parse_force(const std::string& spec, std::vector<ForcedArm>* out,
                                std::string* error) const {
  std::vector<ForcedArm> result;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find_first_of(";,", start);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = trim(spec.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    ForcedArm f;
    if (!lookup(entry, &f, error)) return false;
    for (const ForcedArm& seen : result) {
      if (seen.op == f.op) {
        *error = std::string("DYNAMICCL_FORCE names ") + op_name(f.op) + " twice";
        return false;
      }
    }
    result.push_back(f);
  }
  *out = std::move(result);
  return true;
}

}  // namespace dynamiccl
