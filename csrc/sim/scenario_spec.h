// The plain description of one simulated scenario. Python (dynamiccl_pg/sim/scenario.py) parses
// and strictly validates the JSON file and fills these structs through pybind; C++ tests and
// benchmarks fill them directly. C++ re-checks what it relies on (validate_spec) so a bad
// struct fails with a message instead of producing nonsense.
// Field meanings and units are documented for users in benchmarks/scenarios/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl_model/topology.h"

namespace dynamiccl {
namespace sim {

// The simulator is built on NCCL's cost model (nccl_model/): its names are the simulator's.
using namespace nccl;

// Truth multipliers for one algorithm/protocol pair; "*" matches every value.
struct TruthEntry {
  std::string algo = "*";
  std::string proto = "*";
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
  std::string link;  // "intra" | "inter"
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
  std::string op;     // call: allreduce | allgather | reduce_scatter | broadcast | reduce | send
  uint64_t bytes = 0; // call: the size NCCL sees (full buffer for allgather / reduce_scatter)
  int per_step = 1;   // call: consecutive copies per step
  std::string phase = "post";  // call: fwd | bwd | post (position within the step)
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
  // Noise, per rank and call: log-normal with std-dev `noise_sigma` of the log; with probability
  // `outlier_rate` a rank's cost is `outlier_factor` times higher (a preempted rank, a noisy
  // neighbour: a heavy tail that hits whatever arm runs).
  double noise_sigma = 0.0;
  double outlier_rate = 0.0;
  double outlier_factor = 5.0;
  // Ranks reach a call up to this far apart (uniform): an early rank's kernel waits for the last.
  double arrival_skew_us = 0.0;
  // Calls of a group overlap (asynchronous calls in flight together): a call's measured duration
  // includes `overlap` x the previous call's cost, which it queued behind.
  double overlap = 0.0;
  ChannelModelSpec channel_model;
  std::vector<CongestionSpec> congestion;
  std::vector<WorkloadSpec> workload;
  // Channel caps offered as arms (Simple and LL128 only: LL is latency-bound). Empty with
  // derive_channel_caps = a quarter and a half of the group's channel count.
  std::vector<int> channel_caps;
  bool derive_channel_caps = true;
  // Consensus as the product runs it (policy/round_scheduler.h): rounds of `round_calls` learned
  // calls of a group, applied one round later; a call's cost is the product's reduction for NCCL
  // (the minimum) over `ranks_sampled` ranks' measured durations; a round costs the job
  // `round_cost_us` (its control-plane all-reduce), which settled states weigh against measuring.
  int round_calls = 16;
  int ranks_sampled = 4;
  double round_cost_us = 0.0;
  std::vector<HeadOverride> heads;
};

// Throws std::invalid_argument naming the first field that is out of range.
void validate_spec(const ScenarioSpec& spec);

}  // namespace sim
}  // namespace dynamiccl
