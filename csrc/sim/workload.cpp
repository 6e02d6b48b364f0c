#include "sim/workload.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace dynamiccl {
namespace sim {

namespace {

constexpr const char* kPhaseNames[kNumPhases] = {"fwd", "bwd", "post"};

// Where a call sits in the step: microbatch, phase, position within the phase (0..1, layer
// order as executed), then the workload entry and the call's index within it.
struct Placed {
  int mb;
  int phase;
  double pos;
  int entry;
  int k;
  CallSite site;
};

[[noreturn]] void bad(int entry, const std::string& what) {
  throw std::invalid_argument("workload[" + std::to_string(entry) + "]: " + what);
}

// The role an entry's traffic has, false when a call names an unknown role.
bool entry_role(const WorkloadSpec& w, Role* role) {
  if (w.kind == "call") return parse_role(w.role, role);
  if (w.kind == "ddp") *role = Role::kDataParallel;
  else if (w.kind == "fsdp") *role = Role::kFsdpAllGather;
  else if (w.kind == "tp") *role = Role::kTensorParallel;
  else if (w.kind == "pp") *role = Role::kPipeline;
  else return false;
  return true;
}

// The group an entry gets when it names none, with the role's usual shape.
GroupInfo usual_group(Role role, const TopologySpec& topo) {
  if (role == Role::kTensorParallel) return {"tp", {1, topo.gpus_per_node}};
  if (role == Role::kPipeline) return {"pp", topo.nodes >= 2 ? GroupShape{2, 1} : GroupShape{1, 2}};
  const GroupShape all{topo.nodes, topo.gpus_per_node};
  if (role == Role::kDataParallel || role == Role::kFsdpAllGather ||
      role == Role::kFsdpReduceScatter)
    return {"dp", all};
  return {"world", all};
}

std::string shape_text(const GroupShape& s) {
  return std::to_string(s.nodes) + "x" + std::to_string(s.gpus_per_node);
}

class Builder {
 public:
  explicit Builder(const ScenarioSpec& spec) : spec_(spec) {}

  Workload build() {
    if (spec_.workload.empty()) throw std::invalid_argument("workload: at least one entry");
    if (spec_.microbatches < 1) throw std::invalid_argument("microbatches must be >= 1");
    std::vector<SpecProblem> problems;
    plan_ = plan_groups(spec_, &problems);
    if (!problems.empty())
      throw std::invalid_argument(problems[0].path + ": " + problems[0].message);
    for (size_t i = 0; i < spec_.workload.size(); ++i) add_entry(static_cast<int>(i));
    std::stable_sort(placed_.begin(), placed_.end(), [](const Placed& a, const Placed& b) {
      if (a.mb != b.mb) return a.mb < b.mb;
      if (a.phase != b.phase) return a.phase < b.phase;
      if (a.pos != b.pos) return a.pos < b.pos;
      if (a.entry != b.entry) return a.entry < b.entry;
      return a.k < b.k;
    });
    Workload w;
    w.groups = plan_.groups;
    for (Placed& p : placed_) w.calls.push_back(std::move(p.site));
    return w;
  }

 private:
  const ScenarioSpec& spec_;
  GroupPlan plan_;
  std::vector<Placed> placed_;

  int last_mb() const { return spec_.microbatches - 1; }

  void emit(int entry, int k, int mb, int phase, double pos, int group, Role role, OpKind op,
            uint64_t eff_bytes, bool overlapped = false) {
    Placed p{mb, phase, pos, entry, k, CallSite{}};
    CallSite& s = p.site;
    s.mb = mb;
    s.phase = phase;
    s.pos = pos;
    if (overlapped && spec_.compute.active()) s.ctx.exposure = Exposure::kOverlapped;
    s.group = group;
    s.ctx.op = op;
    s.ctx.effective_bytes = eff_bytes;
    s.ctx.group_size = plan_.groups[group].shape.ranks();
    s.ctx.role = role;
    placed_.push_back(std::move(p));
  }

  static uint64_t mib(double mb) { return static_cast<uint64_t>(std::llround(mb * 1048576.0)); }

  void add_entry(int i) {
    const WorkloadSpec& w = spec_.workload[i];
    const int g = plan_.entry_group[i];
    if (w.kind == "call") {
      Role role;
      OpKind op;
      int phase;
      if (!parse_role(w.role, &role))
        bad(i, "role '" + w.role + "' (accepted: " + role_names().joined() + ")");
      if (!parse_op(w.op, &op) || !simulated_op(op))
        bad(i, "op '" + w.op + "' (accepted: " + join_names(simulated_op_names()) + ")");
      if (!parse_phase(w.phase, &phase))
        bad(i, "phase '" + w.phase + "' (accepted: " + join_names(phase_names()) + ")");
      if (w.bytes < 1) bad(i, "bytes must be >= 1");
      if (w.per_step < 1) bad(i, "per_step must be >= 1");
      Exposure exposure;
      if (!parse_name(exposure_names(), w.exposure, &exposure))
        bad(i, "exposure '" + w.exposure + "' (accepted: " + exposure_names().joined() + ")");
      const bool overlapped = exposure == Exposure::kOverlapped;
      for (int k = 0; k < w.per_step; ++k)
        emit(i, k, last_mb(), phase, 0.5, g, role, op, w.bytes, overlapped);
    } else if (w.kind == "ddp") {
      std::vector<uint64_t> params = w.param_bytes;
      if (params.empty()) params.assign(static_cast<size_t>(std::max(w.layers, 0)), w.layer_bytes);
      for (uint64_t b : params)
        if (b < 1) bad(i, "param_bytes entries must be >= 1");
      if (!(w.bucket_cap_mb > 0) || !(w.first_bucket_mb > 0))
        bad(i, "bucket_cap_mb and first_bucket_mb must be > 0");
      const std::vector<uint64_t> buckets = ddp_buckets(params, mib(w.bucket_cap_mb),
                                                        mib(w.first_bucket_mb));
      uint64_t total = 0, done = 0;
      for (uint64_t b : buckets) total += b;
      for (size_t k = 0; k < buckets.size(); ++k) {
        done += buckets[k];
        // A bucket is reduced as soon as backward has produced all its gradients.
        // The last bucket ends backward: the step waits for it; the others overlap backward.
        emit(i, static_cast<int>(k), last_mb(), kBwd, static_cast<double>(done) / total, g,
             Role::kDataParallel, OpKind::kAllReduce, buckets[k], k + 1 < buckets.size());
      }
    } else if (w.kind == "fsdp") {
      if (w.layers < 1 || w.layer_bytes < 1) bad(i, "fsdp needs layers >= 1 and layer_bytes >= 1");
      const double L = w.layers;
      int k = 0;
      for (int mb = 0; mb < spec_.microbatches; ++mb) {
        // The first forward all-gather is waited for; the others are prefetched (overlapped).
        for (int l = 0; l < w.layers; ++l)
          emit(i, k++, mb, kFwd, l / L, g, Role::kFsdpAllGather, OpKind::kAllGather, w.layer_bytes,
               l > 0);
        for (int l = w.layers - 1; l >= 0; --l) {
          const double pos = (w.layers - 1 - l) / L;
          if (w.reshard_after_forward)
            emit(i, k++, mb, kBwd, pos, g, Role::kFsdpAllGather, OpKind::kAllGather, w.layer_bytes,
                 true);
          emit(i, k++, mb, kBwd, pos + 0.75 / L, g, Role::kFsdpReduceScatter,
               OpKind::kReduceScatter, w.layer_bytes, true);
        }
      }
    } else if (w.kind == "tp") {
      if (w.layers < 1 || w.activation_bytes < 1)
        bad(i, "tp needs layers >= 1 and activation_bytes >= 1");
      if (w.calls_per_layer < 1) bad(i, "calls_per_layer must be >= 1");
      const double L = w.layers;
      int k = 0;
      for (int mb = 0; mb < spec_.microbatches; ++mb) {
        for (int dir = kFwd; dir <= kBwd; ++dir) {
          for (int j = 0; j < w.layers; ++j) {
            for (int c = 0; c < w.calls_per_layer; ++c)
              emit(i, k++, mb, dir, (j + 0.5) / L, g, Role::kTensorParallel, OpKind::kAllReduce,
                   w.activation_bytes);
          }
        }
      }
    } else if (w.kind == "pp") {
      if (w.activation_bytes < 1) bad(i, "pp needs activation_bytes >= 1");
      int k = 0;
      for (int mb = 0; mb < spec_.microbatches; ++mb) {
        for (int dir = kFwd; dir <= kBwd; ++dir) {
          emit(i, k++, mb, dir, 1.0, g, Role::kPipeline, OpKind::kSend, w.activation_bytes, true);
        }
      }
    } else {
      bad(i, "kind '" + w.kind + "' (accepted: call, ddp, fsdp, tp, pp)");
    }
  }
};

}  // namespace

const char* phase_name(int phase) {
  return phase >= 0 && phase < kNumPhases ? kPhaseNames[phase] : "unknown";
}

std::vector<std::string> phase_names() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumPhases; ++i) out.push_back(phase_name(i));
  return out;
}

bool parse_phase(const std::string& name, int* out) {
  for (int i = 0; i < kNumPhases; ++i) {
    if (name == kPhaseNames[i]) {
      *out = i;
      return true;
    }
  }
  return false;
}

bool simulated_op(OpKind op) { return func_of(op) >= 0 || op == OpKind::kSend; }

std::vector<std::string> simulated_op_names() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i) {
    if (simulated_op(static_cast<OpKind>(i))) out.push_back(op_name(static_cast<OpKind>(i)));
  }
  return out;
}

GroupPlan plan_groups(const ScenarioSpec& spec, std::vector<SpecProblem>* problems) {
  const TopologySpec& topo = spec.topology;
  GroupPlan plan;
  auto fail = [problems](const std::string& path, const std::string& what) {
    problems->push_back({path, what});
  };
  for (size_t i = 0; i < spec.workload.size(); ++i) {
    const WorkloadSpec& w = spec.workload[i];
    const std::string at = "workload[" + std::to_string(i) + "].group";
    Role role;
    if (!entry_role(w, &role)) {
      plan.entry_group.push_back(-1);
      continue;
    }
    GroupInfo g = usual_group(role, topo);
    if (!w.group.name.empty()) g.name = w.group.name;
    int known = -1;
    for (size_t k = 0; k < plan.groups.size(); ++k)
      if (plan.groups[k].name == g.name) known = static_cast<int>(k);
    // A group named again keeps its shape; the role's usual one may differ from the first use.
    if (known >= 0 && !w.group.name.empty()) g.shape = plan.groups[known].shape;
    if (w.group.nodes > 0) g.shape.nodes = w.group.nodes;
    if (w.group.gpus_per_node > 0) g.shape.gpus_per_node = w.group.gpus_per_node;
    if (w.group.nodes > topo.nodes)
      fail(at + ".nodes", std::to_string(w.group.nodes) + " exceeds topology.nodes (" +
                              std::to_string(topo.nodes) + ")");
    if (w.group.gpus_per_node > topo.gpus_per_node)
      fail(at + ".gpus_per_node", std::to_string(w.group.gpus_per_node) +
                                      " exceeds topology.gpus_per_node (" +
                                      std::to_string(topo.gpus_per_node) + ")");
    const int ranks = g.shape.ranks();
    if (ranks < 2)
      fail(at, "group '" + g.name + "' has " + std::to_string(ranks) + " rank (accepted: >= 2)");
    OpKind op;
    const bool sends = w.kind == "pp" ||
                       (w.kind == "call" && parse_op(w.op, &op) && op == OpKind::kSend);
    if (sends && ranks != 2)
      fail(at, "a send needs a group of exactly 2 ranks, '" + g.name + "' has " +
                   std::to_string(ranks));
    if (known >= 0 && (plan.groups[known].shape.nodes != g.shape.nodes ||
                       plan.groups[known].shape.gpus_per_node != g.shape.gpus_per_node))
      fail(at, "group '" + g.name + "' is " + shape_text(g.shape) + " here but " +
                   shape_text(plan.groups[known].shape) + " in an earlier entry");
    if (known < 0) {
      plan.groups.push_back(g);
      known = static_cast<int>(plan.groups.size()) - 1;
    }
    plan.entry_group.push_back(known);
  }
  return plan;
}

std::vector<uint64_t> ddp_buckets(const std::vector<uint64_t>& param_bytes, uint64_t cap,
                                  uint64_t first_cap) {
  std::vector<uint64_t> out;
  uint64_t cur = 0;
  uint64_t limit = first_cap;
  for (auto it = param_bytes.rbegin(); it != param_bytes.rend(); ++it) {
    cur += *it;
    if (cur >= limit) {
      out.push_back(cur);
      cur = 0;
      limit = cap;
    }
  }
  if (cur > 0) out.push_back(cur);
  return out;
}

Workload build_workload(const ScenarioSpec& spec) { return Builder(spec).build(); }

}  // namespace sim
}  // namespace dynamiccl
