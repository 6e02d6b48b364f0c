// How a decision is expressed to NCCL: through the cost table (tuner ABI v3+) or through
// the direct algorithm/protocol outputs (ABI v2). Pure functions of their arguments.
#ifndef DYNAMICCL_NCCL_FORCING_H_
#define DYNAMICCL_NCCL_FORCING_H_

#include <stddef.h>

namespace dynamiccl {
namespace nccl_plugin {

// Makes NCCL pick the cheapest entry of `table` (row-major [num_algo][num_proto]) whose
// algorithm is `algo` and protocol is `proto` (-1 = any): that entry becomes 0.0 and any
// other entry that was already 0.0 becomes slightly positive, so NCCL's strict-minimum scan
// lands on ours. Entries NCCL marked unavailable (negative) are never written or chosen.
// Returns false, leaving the table untouched, when no entry qualifies or the arguments
// are out of range.
bool force_in_cost_table(float* table, int num_algo, int num_proto, int algo, int proto);

// What the v2 ABI (NCCL 2.21) tells the tuner about availability, plus what init learnt.
struct V2Facts {
  int coll_type;
  int collnet_support;  // NCCL's per-call flag
  int nvls_support;     // NCCL's per-call flag
  size_t n_nodes;
  bool env_restricted;  // NCCL_ALGO or NCCL_PROTO was set: their effect is invisible to v2
};

// Whether forcing (algo, proto) through the v2 outputs is known to be safe. NCCL 2.21
// does not re-check a tuner's pick, so only pairs its model offers for this collective
// are allowed: both must be given; LL128 is refused (its enablement depends on the
// hardware path, which v2 does not reveal); CollNet/NVLS need NCCL's support flag and the
// Simple protocol; NVLS-Tree needs more than one node; PAT does not exist in 2.21.
bool v2_pair_allowed(const V2Facts& facts, int algo, int proto);

// The channel cap to hand NCCL for a published value (<= 0: none, returns 0).
int channel_cap(int nchannels);

}  // namespace nccl_plugin
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_FORCING_H_
