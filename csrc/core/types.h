// The project's vocabulary, defined once: what a collective is (its op, role, size bin), what
// the policy answers (a decision), what an engine can be asked to do (an action), and the names
// of every enumeration. Python reads the names through dynamiccl_pg._C (vocabulary()); error
// messages build their accepted lists from them. Torch-free: the learner, the simulator and the
// tests use it without libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dynamiccl {

// The names of one enumeration, indexed by its values.
struct NameList {
  const char* const* names;
  int count;
  const char* name(int i) const { return i >= 0 && i < count ? names[i] : "unknown"; }
  // Index of `value`, or -1.
  int find(const std::string& value) const;
  std::string joined() const;  // "a, b, c": the accepted values in an error message
  std::vector<std::string> list() const { return std::vector<std::string>(names, names + count); }
};
// "a, b, c": the accepted values in an error message.
std::string join_names(const std::vector<std::string>& names);

enum class OpKind : uint8_t {
  kAllReduce = 0,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kBarrier,
  kCount
};
constexpr int kNumOps = static_cast<int>(OpKind::kCount);
NameList op_names();  // "allreduce", "broadcast", ...

// Who the traffic belongs to. Each role has its own policy head (own arms and budgets):
// latency-critical roles explore little, bulk gradient traffic explores more.
enum class Role : uint8_t {
  kDefault = 0,        // default_pg or an unnamed group, no hint
  kDataParallel,       // DDP gradient buckets, DATA_PARALLEL_GROUP, mesh_dp / dp_replicate
  kFsdpAllGather,      // FSDP2 unshard (all-gather on the shard group)
  kFsdpReduceScatter,  // FSDP2 gradient reduce-scatter
  kTensorParallel,     // TENSOR_MODEL_PARALLEL_GROUP, mesh_tp: activation all-reduce/all-gather
  kPipeline,           // PIPELINE_MODEL_PARALLEL_GROUP, mesh_pp: stage sends/receives
  kContextParallel,    // CONTEXT_PARALLEL_GROUP, mesh_cp
  kExpertParallel,     // EXPERT_MODEL_PARALLEL_GROUP, mesh_ep: all-to-all dispatch
  kCount
};
constexpr int kNumRoles = static_cast<int>(Role::kCount);
NameList role_names();  // "default", "dp", "fsdp_ag", "fsdp_rs", "tp", "pp", "cp", "ep"

// learn: probe and adapt; frozen: run the best known arm, never probe; off: exact pass-through.
enum class Mode : uint8_t { kLearn = 0, kFrozen, kOff, kCount };
NameList mode_names();

// The engines a group runs calls on: CPU (Gloo and our schedules) and NCCL.
enum class EngineKind : uint8_t { kCpu = 0, kNccl, kCount };
constexpr int kNumEngines = static_cast<int>(EngineKind::kCount);
NameList engine_names();  // "cpu", "nccl"

// How a call's per-rank durations become its cost. Min removes waiting for late peers but
// rewards schedules whose ranks finish at different times (a tree's root is done long before its
// leaves); max charges the whole collective. Auto: max for our CPU schedules (asymmetric), min
// for NCCL kernels (every rank's kernel spans the whole collective).
enum class CostReduce : uint8_t { kAuto = 0, kMin, kMax, kCount };
NameList cost_reduce_names();
inline bool reduces_by_max(CostReduce r, EngineKind e) {
  return r == CostReduce::kMax || (r == CostReduce::kAuto && e == EngineKind::kCpu);
}

// Parses a name of `list` into an enum value; false for an unknown name.
template <typename E>
bool parse_name(NameList list, const std::string& name, E* out) {
  const int i = list.find(name);
  if (i < 0) return false;
  *out = static_cast<E>(i);
  return true;
}
inline const char* op_name(OpKind op) { return op_names().name(static_cast<int>(op)); }
inline const char* role_name(Role role) { return role_names().name(static_cast<int>(role)); }
inline const char* mode_name(Mode mode) { return mode_names().name(static_cast<int>(mode)); }
inline const char* engine_name(EngineKind e) { return engine_names().name(static_cast<int>(e)); }
inline bool parse_op(const std::string& s, OpKind* out) { return parse_name(op_names(), s, out); }
inline bool parse_role(const std::string& s, Role* out) { return parse_name(role_names(), s, out); }
inline bool parse_mode(const std::string& s, Mode* out) { return parse_name(mode_names(), s, out); }

// A learner state's size class: bin b holds [2^b, 2^(b+1)) bytes (0 and 1 byte: bin 0), the last
// bin everything larger. Constant time (it is on the hot path).
constexpr int kNumSizeBins = 48;
inline int size_bin(uint64_t bytes) {
  if (bytes <= 1) return 0;
  const int b = 63 - __builtin_clzll(bytes);
  return b < kNumSizeBins - 1 ? b : kNumSizeBins - 1;
}

// Whether the step waits for a call (docs/learner.md, "Exposure"). Exposed: the caller
// needs the result at once (synchronous calls, DDP's last bucket, FSDP2's first all-gather,
// tensor-parallel activations), so the step pays the call's whole duration. Overlapped: compute
// runs beside it (DDP's other buckets, prefetched all-gathers, reduce-scatters, pipeline sends),
// so the step pays its exposed tail plus what it takes from that compute. Derived from the
// framework context only, never from a rank's own timing, so it is the same on every rank.
enum class Exposure : uint8_t { kExposed = 0, kOverlapped, kCount };
constexpr int kNumExposures = static_cast<int>(Exposure::kCount);
NameList exposure_names();  // "exposed", "overlapped"
inline const char* exposure_name(Exposure e) { return exposure_names().name(static_cast<int>(e)); }

// The values of Hint::priority and Hint::direction, by name (indexed by value).
NameList priority_names();   // "background" (overlapped), "normal" (the context decides),
                             // "critical" (exposed)
NameList direction_names();  // "forward", "backward"

// What framework integration knows about the call in flight (dynamiccl_pg.hint(...)).
// -1 / kUnset means "not given".
struct Hint {
  static constexpr int kUnset = -1;
  static constexpr int kPriorityBackground = 0, kPriorityCritical = 2;  // priority_names()
  static constexpr int kForward = 0;                                    // direction_names()
  int role = kUnset;       // a Role value forced by the hint
  int bucket = kUnset;     // DDP bucket / FSDP unit index (trace only)
  int is_last = kUnset;    // DDP: last bucket of the step (0/1): exposed, and it ends the step
  int stage = kUnset;      // pipeline stage (trace only)
  int direction = kUnset;  // a direction_names() index
  int priority = kUnset;   // a priority_names() index
};

// What the policy sees of one call. Every field is the same on every rank of the group.
struct CollectiveContext {
  OpKind op = OpKind::kAllReduce;
  uint64_t effective_bytes = 0;  // the size NCCL's tuner sees (full buffer for AG/RS)
  int group_size = 1;
  Role role = Role::kDefault;
  Exposure exposure = Exposure::kExposed;
  bool fused = false;  // a coalesced batch of several tensors, decided once on its total bytes
};

// An engine configuration. Fields an engine does not use stay at -1.
// NCCL: algo/proto are NCCL's enum values (NCCL_ALGO_*, NCCL_PROTO_*), channels a cap,
//       chunk_bytes the chunk size handed to NCCL >= 2.30 (tuner ABI v6; -1 = NCCL's own).
// CPU:  algo indexes the CPU schedule registry, channels is the segment count.
struct Action {
  int8_t algo = -1;
  int8_t proto = -1;
  int16_t channels = -1;
  int32_t chunk_bytes = -1;
  bool is_default() const { return algo < 0 && proto < 0 && channels < 0 && chunk_bytes < 0; }
};

// Arm 0 of every arm set is "engine default": let the engine choose as it would without us.
constexpr uint16_t kDefaultArm = 0;

struct Decision {
  uint32_t state_id = 0;  // index of the learner state (stable for the run, same on all ranks)
  uint16_t arm = kDefaultArm;
  bool probe = false;        // chosen to explore, not because it is the incumbent
  bool measure = false;      // the learner wants this call's cost (consensus must carry it)
  bool after_probe = false;  // the group's previous call was a probe (its skew may land here)
  uint32_t epoch = 0;        // policy epoch (number of consensus rounds applied)
  Action action;             // the arm's action, copied for the engine
};

}  // namespace dynamiccl
