// One training step's collectives, in the order a framework issues them: explicit calls plus
// generators for DDP gradient buckets, FSDP2 per-layer all-gather / reduce-scatter,
// tensor-parallel activation all-reduces and pipeline sends, each tagged with its role and
// process group so that the learner's per-role heads see realistic traffic.
#pragma once

#include <string>
#include <vector>

#include "core/types.h"
#include "nccl_model/topology.h"
#include "sim/scenario_spec.h"

namespace dynamiccl {
namespace sim {

// Where in a step an explicit call sits: forward, backward, or after both.
enum Phase : int { kFwd = 0, kBwd = 1, kPost = 2, kNumPhases = 3 };
const char* phase_name(int phase);  // "fwd", "bwd", "post"
std::vector<std::string> phase_names();
bool parse_phase(const std::string& name, int* out);

// The ops a workload entry can issue: the collectives NCCL's tuner sees, and send.
bool simulated_op(OpKind op);
std::vector<std::string> simulated_op_names();

struct GroupInfo {
  std::string name;
  GroupShape shape;
};

// Each workload entry's process group. Entries naming the same group share it (one learner).
// A dimension left at 0 comes from an earlier entry naming the group, else from the role's
// usual placement: tp one node, pp two ranks on two nodes, everything else the whole topology.
struct GroupPlan {
  std::vector<GroupInfo> groups;
  std::vector<int> entry_group;  // per workload entry: index into groups, -1 = unknown role
};

// Broken rules (a group larger than the topology or of one rank, one name with two shapes,
// a send between other than 2 ranks) are added to `problems` with the entry's key path.
GroupPlan plan_groups(const ScenarioSpec& spec, std::vector<SpecProblem>* problems);

struct CallSite {
  int group = 0;          // index into Workload::groups
  CollectiveContext ctx;  // op, role, effective bytes, group size, exposure
  // Where the call is issued: microbatch, phase, position within the phase's compute (0..1).
  int mb = 0;
  int phase = kPost;
  double pos = 0.5;
};

struct Workload {
  std::vector<GroupInfo> groups;
  std::vector<CallSite> calls;  // one step, in issue order
};

// Throws std::invalid_argument naming the workload entry and field that is wrong. Exposure
// (CollectiveContext::exposure) is set only when the scenario has compute (ComputeSpec::active):
// DDP's last bucket exposed and the others overlapped; FSDP2's first forward all-gather
// exposed, the prefetched all-gathers and the reduce-scatters overlapped; tensor-parallel
// all-reduces exposed; pipeline sends overlapped; a call entry as its `exposure` says. Without
// compute every call is exposed (the step waits for each).
Workload build_workload(const ScenarioSpec& spec);

// DDP's bucket assignment: parameters in reverse order, a bucket closes once it reaches its
// cap (the first bucket's cap is `first_cap`). Returns bucket sizes in bytes, in issue order.
std::vector<uint64_t> ddp_buckets(const std::vector<uint64_t>& param_bytes, uint64_t cap,
                                  uint64_t first_cap);

}  // namespace sim
}  // namespace dynamiccl
