// Vocabulary shared by every layer: what a collective is (its context), what the policy
// answers (a decision), and what an engine can be asked to do (an action).
// Torch-free on purpose: the learner, the simulator and the tests use it without libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dynamiccl {

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
const char* op_name(OpKind op);  // "allreduce", "broadcast", ...
// Parses op_name()'s output; returns false for an unknown name.
bool parse_op(const std::string& name, OpKind* out);

// Who the traffic belongs to. Each role has its own policy head (own arms and budgets):
// latency-critical roles explore little, bulk gradient traffic explores more.
enum class Role : uint8_t {
  kDefault = 0,       // default_pg or an unnamed group, no hint
  kDataParallel,      // DDP gradient buckets, DATA_PARALLEL_GROUP, mesh_dp / dp_replicate
  kFsdpAllGather,     // FSDP2 unshard (all-gather on the shard group)
  kFsdpReduceScatter, // FSDP2 gradient reduce-scatter
  kTensorParallel,    // TENSOR_MODEL_PARALLEL_GROUP, mesh_tp: activation all-reduce/all-gather
  kPipeline,          // PIPELINE_MODEL_PARALLEL_GROUP, mesh_pp: stage sends/receives
  kContextParallel,   // CONTEXT_PARALLEL_GROUP, mesh_cp
  kExpertParallel,    // EXPERT_MODEL_PARALLEL_GROUP, mesh_ep: all-to-all dispatch
  kCount
};
constexpr int kNumRoles = static_cast<int>(Role::kCount);
const char* role_name(Role role);  // "default", "dp", "fsdp_ag", "fsdp_rs", "tp", "pp", "cp", "ep"
bool parse_role(const std::string& name, Role* out);

// The names of a vocabulary's values 0..n-1: name_of(i), or nullptr to leave value i out.
template <typename NameOf>
std::vector<std::string> names_of(int n, NameOf name_of) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    const char* name = name_of(i);
    if (name != nullptr) out.push_back(name);
  }
  return out;
}
// "a, b, c": the accepted values in an error message.
std::string join_names(const std::vector<std::string>& names);
std::vector<std::string> op_names();    // every OpKind's name, in enum order
std::vector<std::string> role_names();  // every Role's name, in enum order

// log2 bucket of the effective byte count: bin b holds [2^b, 2^(b+1)); 0 bytes -> bin 0.
constexpr int kNumSizeBins = 48;
inline int size_bin(uint64_t bytes) {
  int b = 0;
  while (bytes > 1 && b < kNumSizeBins - 1) {
    bytes >>= 1;
    ++b;
  }
  return b;
}

// What framework integration knows about the call in flight (dynamiccl_pg.hint(...)).
// -1 / kUnset means "not given".
struct Hint {
  static constexpr int kUnset = -1;
  int role = kUnset;      // a Role value forced by the hint
  int bucket = kUnset;    // DDP bucket index
  int is_last = kUnset;   // DDP: last bucket of the step (0/1)
  int stage = kUnset;     // pipeline stage
  int direction = kUnset; // pipeline: 0 forward, 1 backward
  int priority = kUnset;  // larger = more latency-critical
};

struct CollectiveContext {
  OpKind op = OpKind::kAllReduce;
  uint8_t dtype = 0;             // at::ScalarType value (opaque here)
  uint64_t bytes = 0;            // this rank's input payload in bytes
  uint64_t effective_bytes = 0;  // the size NCCL's tuner sees (full buffer for AG/RS)
  int group_size = 1;
  int group_rank = 0;
  Role role = Role::kDefault;
  uint64_t seq = 0;              // per-group collective sequence number
  Hint hint;
};

// An engine configuration. Fields an engine does not use stay at -1.
// NCCL: algo/proto are NCCL's enum values (NCCL_ALGO_*, NCCL_PROTO_*), channels a cap.
// CPU:  algo is a CpuAlgo value, segments the pipelining segment count.
enum class EngineKind : uint8_t { kCpu = 0, kNccl = 1, kSim = 2 };
struct Action {
  int8_t algo = -1;
  int8_t proto = -1;
  int16_t channels = -1;  // NCCL channel cap, or CPU segment count
  bool is_default() const { return algo < 0 && proto < 0 && channels < 0; }
};

// Arm 0 of every arm set is "engine default": let the engine choose as it would without us.
constexpr uint16_t kDefaultArm = 0;

struct Decision {
  uint32_t state_id = 0;   // index of the learner state (stable for the run, same on all ranks)
  uint16_t arm = kDefaultArm;
  bool probe = false;      // chosen to explore, not because it is the incumbent
  uint32_t epoch = 0;      // policy epoch (number of consensus rounds applied)
  Action action;           // the arm's action, copied for the engine
};

}  // namespace dynamiccl
