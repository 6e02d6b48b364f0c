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

class Builder {
 public:
  Builder(const ScenarioSpec& spec, const Topology& topo) : spec_(spec), topo_(topo) {}

  Workload build() {
    if (spec_.workload.empty()) throw std::invalid_argument("workload: at least one entry");
    if (spec_.microbatches < 1) throw std::invalid_argument("microbatches must be >= 1");
    for (size_t i = 0; i < spec_.workload.size(); ++i) add_entry(static_cast<int>(i));
    std::stable_sort(placed_.begin(), placed_.end(), [](const Placed& a, const Placed& b) {
      if (a.mb != b.mb) return a.mb < b.mb;
      if (a.phase != b.phase) return a.phase < b.phase;
      if (a.pos != b.pos) return a.pos < b.pos;
      if (a.entry != b.entry) return a.entry < b.entry;
      return a.k < b.k;
    });
    Workload w;
    w.groups = groups_;
    for (Placed& p : placed_) w.calls.push_back(std::move(p.site));
    return w;
  }

 private:
  const ScenarioSpec& spec_;
  const Topology& topo_;
  std::vector<GroupInfo> groups_;
  std::vector<Placed> placed_;

  int last_mb() const { return spec_.microbatches - 1; }

  // The entry's process group: dimensions not given take the role's usual placement.
  int group_for(int entry, const GroupSpec& gs, Role role) {
    std::string name = gs.name;
    GroupShape shape{topo_.nodes, topo_.gpus_per_node};
    if (role == Role::kTensorParallel) {
      if (name.empty()) name = "tp";
      shape = {1, topo_.gpus_per_node};
    } else if (role == Role::kPipeline) {
      if (name.empty()) name = "pp";
      shape = topo_.nodes >= 2 ? GroupShape{2, 1} : GroupShape{1, 2};
    } else if (role == Role::kDataParallel || role == Role::kFsdpAllGather ||
               role == Role::kFsdpReduceScatter) {
      if (name.empty()) name = "dp";
    } else if (name.empty()) {
      name = "world";
    }
    // A group named before keeps its shape: dimensions left out are taken from it.
    for (const GroupInfo& g : groups_)
      if (!gs.name.empty() && g.name == gs.name) shape = g.shape;
    if (gs.nodes < 0 || gs.gpus_per_node < 0) bad(entry, "group dimensions must be >= 0");
    if (gs.nodes > 0) shape.nodes = gs.nodes;
    if (gs.gpus_per_node > 0) shape.gpus_per_node = gs.gpus_per_node;
    if (shape.nodes > topo_.nodes)
      bad(entry, "group '" + name + "' spans " + std::to_string(shape.nodes) +
                     " nodes but the topology has " + std::to_string(topo_.nodes));
    if (shape.gpus_per_node > topo_.gpus_per_node)
      bad(entry, "group '" + name + "' uses " + std::to_string(shape.gpus_per_node) +
                     " GPUs per node but the topology has " +
                     std::to_string(topo_.gpus_per_node));
    if (shape.ranks() < 2) bad(entry, "group '" + name + "' must have at least 2 ranks");
    for (size_t i = 0; i < groups_.size(); ++i) {
      if (groups_[i].name != name) continue;
      if (groups_[i].shape.nodes != shape.nodes ||
          groups_[i].shape.gpus_per_node != shape.gpus_per_node)
        bad(entry, "group '" + name + "' was already given another shape");
      return static_cast<int>(i);
    }
    groups_.push_back(GroupInfo{name, shape});
    return static_cast<int>(groups_.size() - 1);
  }

  void emit(int entry, int k, int mb, int phase, double pos, int group, Role role, OpKind op,
            uint64_t eff_bytes, Hint hint) {
    Placed p{mb, phase, pos, entry, k, CallSite{}};
    CallSite& s = p.site;
    s.group = group;
    const int n = groups_[group].shape.ranks();
    s.ctx.op = op;
    s.ctx.dtype = 15;  // bfloat16 (opaque to the learner)
    s.ctx.effective_bytes = eff_bytes;
    s.ctx.bytes = op == OpKind::kAllGather ? std::max<uint64_t>(1, eff_bytes / n) : eff_bytes;
    s.ctx.group_size = n;
    s.ctx.group_rank = 0;
    s.ctx.role = role;
    s.ctx.hint = hint;
    placed_.push_back(std::move(p));
  }

  static uint64_t mib(double mb) { return static_cast<uint64_t>(std::llround(mb * 1048576.0)); }

  void add_entry(int i) {
    const WorkloadSpec& w = spec_.workload[i];
    if (w.kind == "call") {
      Role role;
      OpKind op;
      int phase;
      if (!parse_role(w.role, &role))
        bad(i, "role '" + w.role + "' (accepted: " + join_names(role_names()) + ")");
      if (!parse_op(w.op, &op) || !simulated_op(op))
        bad(i, "op '" + w.op + "' (accepted: " + join_names(simulated_op_names()) + ")");
      if (!parse_phase(w.phase, &phase))
        bad(i, "phase '" + w.phase + "' (accepted: " + join_names(phase_names()) + ")");
      if (w.bytes < 1) bad(i, "bytes must be >= 1");
      if (w.per_step < 1) bad(i, "per_step must be >= 1");
      const int g = group_for(i, w.group, role);
      if (op == OpKind::kSend && groups_[g].shape.ranks() != 2)
        bad(i, "a send needs a group of exactly 2 ranks");
      for (int k = 0; k < w.per_step; ++k)
        emit(i, k, last_mb(), phase, 0.5, g, role, op, w.bytes, Hint{});
    } else if (w.kind == "ddp") {
      std::vector<uint64_t> params = w.param_bytes;
      if (!params.empty() && w.layers > 0) bad(i, "give either param_bytes or layers, not both");
      if (params.empty()) {
        if (w.layers < 1 || w.layer_bytes < 1)
          bad(i, "ddp needs param_bytes or layers + layer_bytes");
        params.assign(static_cast<size_t>(w.layers), w.layer_bytes);
      }
      for (uint64_t b : params)
        if (b < 1) bad(i, "param_bytes entries must be >= 1");
      if (!(w.bucket_cap_mb > 0) || !(w.first_bucket_mb > 0))
        bad(i, "bucket_cap_mb and first_bucket_mb must be > 0");
      const std::vector<uint64_t> buckets =
          ddp_buckets(params, mib(w.bucket_cap_mb), mib(w.first_bucket_mb));
      const int g = group_for(i, w.group, Role::kDataParallel);
      uint64_t total = 0, done = 0;
      for (uint64_t b : buckets) total += b;
      for (size_t k = 0; k < buckets.size(); ++k) {
        done += buckets[k];
        Hint h;
        h.bucket = static_cast<int>(k);
        h.is_last = k + 1 == buckets.size() ? 1 : 0;
        // A bucket is reduced as soon as backward has produced all its gradients.
        emit(i, static_cast<int>(k), last_mb(), kBwd, static_cast<double>(done) / total, g,
             Role::kDataParallel, OpKind::kAllReduce, buckets[k], h);
      }
    } else if (w.kind == "fsdp") {
      if (w.layers < 1 || w.layer_bytes < 1) bad(i, "fsdp needs layers >= 1 and layer_bytes >= 1");
      const int g = group_for(i, w.group, Role::kFsdpAllGather);
      const double L = w.layers;
      int k = 0;
      for (int mb = 0; mb < spec_.microbatches; ++mb) {
        for (int l = 0; l < w.layers; ++l)
          emit(i, k++, mb, kFwd, l / L, g, Role::kFsdpAllGather, OpKind::kAllGather,
               w.layer_bytes, Hint{});
        for (int l = w.layers - 1; l >= 0; --l) {
          const double pos = (w.layers - 1 - l) / L;
          if (w.reshard_after_forward)
            emit(i, k++, mb, kBwd, pos, g, Role::kFsdpAllGather, OpKind::kAllGather,
                 w.layer_bytes, Hint{});
          emit(i, k++, mb, kBwd, pos + 0.75 / L, g, Role::kFsdpReduceScatter,
               OpKind::kReduceScatter, w.layer_bytes, Hint{});
        }
      }
    } else if (w.kind == "tp") {
      if (w.layers < 1 || w.activation_bytes < 1)
        bad(i, "tp needs layers >= 1 and activation_bytes >= 1");
      if (w.calls_per_layer < 1) bad(i, "calls_per_layer must be >= 1");
      const int g = group_for(i, w.group, Role::kTensorParallel);
      const double L = w.layers;
      Hint h;
      h.priority = 1;
      int k = 0;
      for (int mb = 0; mb < spec_.microbatches; ++mb) {
        for (int dir = kFwd; dir <= kBwd; ++dir) {
          for (int j = 0; j < w.layers; ++j) {
            for (int c = 0; c < w.calls_per_layer; ++c)
              emit(i, k++, mb, dir, (j + 0.5) / L, g, Role::kTensorParallel, OpKind::kAllReduce,
                   w.activation_bytes, h);
          }
        }
      }
    } else if (w.kind == "pp") {
      if (w.activation_bytes < 1) bad(i, "pp needs activation_bytes >= 1");
      const int g = group_for(i, w.group, Role::kPipeline);
      if (groups_[g].shape.ranks() != 2) bad(i, "a pp group must have exactly 2 ranks");
      int k = 0;
      for (int mb = 0; mb < spec_.microbatches; ++mb) {
        for (int dir = kFwd; dir <= kBwd; ++dir) {
          Hint h;
          h.stage = 0;
          h.direction = dir;
          emit(i, k++, mb, dir, 1.0, g, Role::kPipeline, OpKind::kSend, w.activation_bytes, h);
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

std::vector<std::string> phase_names() { return names_of(kNumPhases, phase_name); }

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
  return names_of(kNumOps, [](int i) {
    const OpKind op = static_cast<OpKind>(i);
    return simulated_op(op) ? op_name(op) : nullptr;
  });
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

Workload build_workload(const ScenarioSpec& spec, const Topology& topo) {
  return Builder(spec, topo).build();
}

}  // namespace sim
}  // namespace dynamiccl
