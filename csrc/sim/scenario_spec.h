// The plain description of one simulated scenario. Python (dynamiccl_pg/sim/scenario.py) parses
// and strictly validates the JSON file and fills these structs through pybind; C++ tests and
// benchmarks fill them directly. validate_spec checks the rules that relate several fields,
// for both.
// Field meanings and units are documented for users in benchmarks/scenarios/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dynamiccl {
namespace sim {

struct LinkSpec {
  std::string type;    // a LinkType name (topology.h); for inter, "" = no network (one node)
  double bw_GBps = 0;  // intra: per-GPU bandwidth; inter: network bandwidth per GPU
  double lat_us = 0;   // intra: added to each intra-node hop; inter: the network's latency
};

struct TopologySpec {
  int nodes = 1;
  int gpus_per_node = 8;
  std::string gpu = "hopper";  // compcap_name() (topology.h)
  std::string cpu = "intel";   // cpu_name() (topology.h)
  LinkSpec intra{"nvlink", 450.0, 0.0};
  LinkSpec inter;
  bool nvswitch = true;  // NVLink through NVSwitch: NVLS / CollNetDirect possible
  bool sharp = false;    // in-network reduction (CollNet) on the inter-node fabric
  int channels = 0;      // communicator channel count; 0 = derived from the links
};

// Truth multipliers for one algorithm/protocol pair.
constexpr const char kTruthWildcard[] = "*";  // as algo or proto: every value
struct TruthEntry {
  std::string algo = kTruthWildcard;
  std::string proto = kTruthWildcard;
  double bw = 1.0;   // multiplies the modelled bandwidth
  double lat = 1.0;  // multiplies the modelled latency
};

// How the real cost depends on the channel count (NCCL's model assumes linear bandwidth
// and no per-channel cost; the defaults reproduce that).
struct ChannelModelSpec {
  double saturation = 1.0;          // bandwidth stops growing beyond this fraction of channels
  double contention = 0.0;          // bandwidth lost when every channel past the knee runs
  double lat_per_channel_us = 0.0;  // fixed cost per channel actually used
};

// Link bandwidth (and optionally latency) cut for steps [from_step, to_step).
struct CongestionSpec {
  int from_step = 0;
  int to_step = 0;
  std::string link;  // kIntraLinks | kInterLinks (topology.h)
  double bw_factor = 1.0;
  double lat_factor = 1.0;
};

// Which ranks a collective spans. A group is one process group (one learner). Dimensions left
// at 0 come from an earlier entry naming the same group, else from the role's usual placement;
// two entries naming the same group must end up with the same shape.
struct GroupSpec {
  std::string name;       // "" = derived from the role ("tp", "pp", "dp", "world")
  int nodes = 0;          // 0 = all nodes of the topology
  int gpus_per_node = 0;  // 0 = all GPUs of a node
};

// One workload entry: an explicit call ("call") or a generator ("ddp", "fsdp", "tp", "pp").
struct WorkloadSpec {
  std::string kind = "call";
  std::string role;   // call: required; generators: fixed by the kind
  std::string op;     // call: simulated_op_names() (workload.h)
  uint64_t bytes = 0; // call: the size NCCL sees (full buffer for allgather / reduce_scatter)
  int per_step = 1;   // call: consecutive copies per step
  std::string phase = "post";  // call: phase_name() (workload.h): position within the step
  GroupSpec group;
  // ddp: parameter sizes in bytes, in model order; buckets are filled in reverse order.
  std::vector<uint64_t> param_bytes;
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  // fsdp / tp / ddp shorthand: `layers` equal layers of `layer_bytes` each.
  int layers = 0;
  uint64_t layer_bytes = 0;
  bool reshard_after_forward = true;  // fsdp: all-gather again in backward
  // tp / pp: activation size per call.
  uint64_t activation_bytes = 0;
  int calls_per_layer = 2;  // tp: all-reduces per layer per direction (attention + MLP)
};

// One HeadConfig field overridden for a role ("all" = every role).
struct HeadOverride {
  std::string role;
  std::string key;
  double value = 0;
};

struct ScenarioSpec {
  std::string name;
  uint64_t seed = 1;
  int steps = 100;
  int microbatches = 1;  // tp and pp traffic repeats per microbatch
  TopologySpec topology;
  std::vector<TruthEntry> truth;
  double noise_sigma = 0.0;  // log-normal per-call noise (std-dev of the log)
  ChannelModelSpec channel_model;
  std::vector<CongestionSpec> congestion;
  std::vector<WorkloadSpec> workload;
  // Channel caps offered as arms (Simple and LL128 only: LL is latency-bound). Empty with
  // derive_channel_caps = a quarter and a half of the group's channel count.
  std::vector<int> channel_caps;
  bool derive_channel_caps = true;
  // Consensus: a round every `consensus_every` calls of a group, applied `consensus_lag`
  // calls later; the cost each call reports is the minimum over `ranks_sampled` ranks.
  int consensus_every = 64;
  int consensus_lag = 0;
  int ranks_sampled = 4;
  std::vector<HeadOverride> heads;
};

// A broken rule: the key path ("workload[2].group.nodes") and what is wrong.
struct SpecProblem {
  std::string path;
  std::string message;
};

// The rules that relate several fields (each field's own type and range are the schema's):
// every problem found.
std::vector<SpecProblem> spec_problems(const ScenarioSpec& spec);

// Throws std::invalid_argument listing spec_problems(), if there are any.
void validate_spec(const ScenarioSpec& spec);

}  // namespace sim
}  // namespace dynamiccl
