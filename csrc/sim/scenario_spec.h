// The plain description of one simulated scenario. What each field means, its unit, range and
// default for files are declared once, in the scenario schema (scenario_schema.cpp), which
// fills these structs from a file; C++ tests and benchmarks fill them directly. validate_spec
// checks the rules that relate several fields, for both.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nccl_model/topology.h"
#include "truth/truth_spec.h"

namespace dynamiccl {
namespace sim {

// The simulator is built on NCCL's cost model (nccl_model/) and on the truth model (truth/): their
// names (TopologySpec, LinkSpec, the algorithms, TruthEntry, GroupWorld...) are the simulator's.
using namespace nccl;
using namespace truth;

// Link bandwidth (and optionally latency) cut for steps [from_step, to_step).
struct CongestionSpec {
  int from_step = 0;
  int to_step = 0;
  std::string link;  // kIntraLinks | kInterLinks (topology.h)
  double bw_factor = 1.0;
  double lat_factor = 1.0;
};

// Which ranks a collective spans (one process group, one learner); plan_groups() (workload.h)
// fills in what is left out.
struct GroupSpec {
  std::string name;       // "" = derived from the role
  int nodes = 0;          // 0 = derived
  int gpus_per_node = 0;  // 0 = derived
};

// One workload entry: an explicit call ("call") or a generator ("ddp", "fsdp", "tp", "pp");
// each kind reads its own fields (scenario_schema.cpp lists which).
struct WorkloadSpec {
  std::string kind = "call";
  std::string role;  // call only: generators imply theirs
  std::string op;    // simulated_op_names() (workload.h)
  uint64_t bytes = 0;
  int per_step = 1;
  std::string phase = "post";  // phase_name() (workload.h)
  GroupSpec group;
  std::vector<uint64_t> param_bytes;  // ddp: empty = `layers` of `layer_bytes`
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  int layers = 0;
  uint64_t layer_bytes = 0;
  bool reshard_after_forward = true;
  uint64_t activation_bytes = 0;
  int calls_per_layer = 2;
  std::string exposure = "exposed";  // call only: exposure_names() (core/types.h)
};

// The step's compute and how overlapped collectives slow it (sim/step_model.h has the model).
// Absent (every duration 0): no compute model; a step is the sum of its calls, as before.
struct ComputeSpec {
  double fwd_us = 0;   // forward compute per microbatch, us
  double bwd_us = 0;   // backward compute per microbatch, us
  double post_us = 0;  // once per step after the last backward (optimizer), us
  int sms = 132;       // SMs per GPU (H100 SXM: 132)
  // Compute slowdown while a collective runs beside it: sm_weight x (channels / sms) +
  // mem_weight x the collective's share of HBM bandwidth (protocol traffic included).
  double sm_weight = 1.0;
  double mem_weight = 0.5;
  double hbm_GBps = 3350;  // H100 SXM HBM3
  // The learner is told where steps end (step trials judge overlapped calls); false: it judges
  // every call by its duration, as the per-call learner did (the baseline of step-time figures).
  bool mark_steps = true;
  bool active() const { return fwd_us > 0 || bwd_us > 0 || post_us > 0; }
};

// HeadConfig fields (head_settings(), policy/learner.h) set for one role, or for every role.
constexpr const char kEveryRole[] = "all";
struct HeadOverrides {
  std::string role;
  std::map<std::string, double> values;
};

struct ScenarioSpec {
  std::string name;
  std::string description;
  std::string expect;  // "gain" | "no_gain"; "" = judged from the run
  uint64_t seed = 1;
  int steps = 100;
  int microbatches = 1;
  TopologySpec topology;
  // What the learner's NCCL prior (and its arm catalog) is built on: "exact" = `topology`, as
  // if the user described the cluster perfectly; "described" = what the backend describes by
  // itself (nccl_model described_topology: the shape, GPU generation and NVLink/PCIe of
  // `topology`, links at their assumed bandwidths), as a user who sets nothing gets.
  std::string prior = "exact";
  std::vector<TruthEntry> truth;
  // Noise, per rank and call: log-normal; with probability `outlier_rate` a rank's cost is
  // `outlier_factor` times higher (a heavy tail that hits whatever arm runs).
  double noise_sigma = 0.0;
  double outlier_rate = 0.0;
  double outlier_factor = 5.0;
  double arrival_skew_us = 0.0;  // ranks reach a call up to this far apart
  double overlap = 0.0;          // share of the previous call's cost a call queues behind
  ChannelModelSpec channel_model;
  std::vector<CongestionSpec> congestion;
  std::vector<WorkloadSpec> workload;
  ComputeSpec compute;
  // Channel caps offered as arms; empty with derive_channel_caps = derived from the group.
  std::vector<int> channel_caps;
  bool derive_channel_caps = true;
  // Consensus as the product runs it (policy/round_scheduler.h): rounds of `round_calls` learned
  // calls, applied one round later; a call's cost is the product's reduction for NCCL (the
  // minimum) over `ranks_sampled` ranks. A round's all-reduce takes round_exchanges(group's
  // ranks) x `hop_us` on the hosts' network while the group's calls go on; it costs the job what
  // of that the round's K calls do not cover (the boundary that applies it waits), unless
  // `round_cost_us` (>= 0) fixes the price.
  int round_calls = 16;
  int ranks_sampled = 4;
  double hop_us = 25.0;
  double round_cost_us = -1.0;
  std::vector<HeadOverrides> heads;  // applied in this order

  // What the truth model needs of the scenario (the emulated NCCL runs on it too).
  ClusterTruth cluster() const {
    return {topology, truth, channel_model, NoiseSpec{noise_sigma, outlier_rate, outlier_factor},
            seed};
  }
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
