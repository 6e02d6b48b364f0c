// Expressing one decision to NCCL without ever choosing what NCCL does not offer.
#include "forcing.h"

#include "abi/nccl_common.h"
#include "dynamiccl_nccl.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

// NCCL fills a table of at most 7 x 3 entries; anything far larger is not a cost table.
constexpr int kMaxTableDim = 64;

// Replaces other zero-cost entries so that 0.0 in our slot is the strict minimum NCCL
// looks for whatever its position (NCCL breaks ties by the lower index).
constexpr float kLiftedZero = 1e-6f;

}  // namespace

bool force_in_cost_table(float* table, int num_algo, int num_proto, int algo, int proto) {
  if (table == nullptr || num_algo <= 0 || num_proto <= 0) return false;
  if (num_algo > kMaxTableDim || num_proto > kMaxTableDim) return false;
  if (algo >= num_algo || proto >= num_proto) return false;

  int best = -1;
  for (int a = 0; a < num_algo; ++a) {
    if (algo >= 0 && a != algo) continue;
    for (int p = 0; p < num_proto; ++p) {
      if (proto >= 0 && p != proto) continue;
      const int i = a * num_proto + p;
      // NCCL marks unavailable entries -1.0; treat every negative value the same way.
      if (!(table[i] >= 0.0f)) continue;
      if (best < 0 || table[i] < table[best]) best = i;
    }
  }
  if (best < 0) return false;

  for (int i = 0; i < num_algo * num_proto; ++i) {
    if (i != best && table[i] == 0.0f) table[i] = kLiftedZero;
  }
  table[best] = 0.0f;
  return true;
}

bool v2_pair_allowed(const V2Facts& facts, int algo, int proto) {
  if (facts.env_restricted) return false;
  if (algo < 0 || proto < 0) return false;  // v2 cannot take only one of the two
  if (algo > NCCL_ALGO_NVLS_TREE || proto > NCCL_PROTO_SIMPLE) return false;
  if (proto == NCCL_PROTO_LL128) return false;

  const bool tree_or_ring = algo == NCCL_ALGO_TREE || algo == NCCL_ALGO_RING;
  if (!tree_or_ring && proto != NCCL_PROTO_SIMPLE) return false;

  switch (facts.coll_type) {
    case ncclFuncBroadcast:
    case ncclFuncReduce: return algo == NCCL_ALGO_RING;
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
      if (algo == NCCL_ALGO_RING) return true;
      return algo == NCCL_ALGO_NVLS && facts.nvls_support && facts.n_nodes == 1;
    case ncclFuncAllReduce:
      switch (algo) {
        case NCCL_ALGO_TREE:
        case NCCL_ALGO_RING: return true;
        case NCCL_ALGO_COLLNET_DIRECT:
        case NCCL_ALGO_COLLNET_CHAIN: return facts.collnet_support != 0;
        case NCCL_ALGO_NVLS: return facts.nvls_support != 0;
        case NCCL_ALGO_NVLS_TREE: return facts.nvls_support != 0 && facts.n_nodes > 1;
        default: return false;
      }
    default: return false;
  }
}

int channel_cap(int nchannels) {
  if (nchannels <= 0) return 0;
  return nchannels > DYNAMICCL_NCCL_MAX_CHANNELS ? DYNAMICCL_NCCL_MAX_CHANNELS : nchannels;
}

}  // namespace nccl_plugin
}  // namespace dynamiccl
