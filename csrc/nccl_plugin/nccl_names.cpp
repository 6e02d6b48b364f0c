// The names NCCL gives its ids, and the check that the public API uses those same ids.
#include "nccl_names.h"

#include <cctype>

#include "abi/nccl_common.h"
#include "dynamiccl_nccl.h"

// The public API's ids are NCCL's: the tuner hands published ids to NCCL and the profiler
// records the ids of the names NCCL reports, both unchanged.
static_assert(DYNAMICCL_NCCL_COLL_BROADCAST == ncclFuncBroadcast &&
                  DYNAMICCL_NCCL_COLL_REDUCE == ncclFuncReduce &&
                  DYNAMICCL_NCCL_COLL_ALLGATHER == ncclFuncAllGather &&
                  DYNAMICCL_NCCL_COLL_REDUCESCATTER == ncclFuncReduceScatter &&
                  DYNAMICCL_NCCL_COLL_ALLREDUCE == ncclFuncAllReduce &&
                  DYNAMICCL_NCCL_NUM_COLLS == NCCL_NUM_FUNCTIONS,
              "collective ids");
static_assert(DYNAMICCL_NCCL_ALGO_UNDEF == NCCL_ALGO_UNDEF &&
                  DYNAMICCL_NCCL_ALGO_TREE == NCCL_ALGO_TREE &&
                  DYNAMICCL_NCCL_ALGO_RING == NCCL_ALGO_RING &&
                  DYNAMICCL_NCCL_ALGO_COLLNET_DIRECT == NCCL_ALGO_COLLNET_DIRECT &&
                  DYNAMICCL_NCCL_ALGO_COLLNET_CHAIN == NCCL_ALGO_COLLNET_CHAIN &&
                  DYNAMICCL_NCCL_ALGO_NVLS == NCCL_ALGO_NVLS &&
                  DYNAMICCL_NCCL_ALGO_NVLS_TREE == NCCL_ALGO_NVLS_TREE &&
                  DYNAMICCL_NCCL_ALGO_PAT == NCCL_ALGO_PAT &&
                  DYNAMICCL_NCCL_NUM_ALGOS == NCCL_NUM_ALGORITHMS,
              "algorithm ids");
static_assert(DYNAMICCL_NCCL_PROTO_UNDEF == NCCL_PROTO_UNDEF &&
                  DYNAMICCL_NCCL_PROTO_LL == NCCL_PROTO_LL &&
                  DYNAMICCL_NCCL_PROTO_LL128 == NCCL_PROTO_LL128 &&
                  DYNAMICCL_NCCL_PROTO_SIMPLE == NCCL_PROTO_SIMPLE &&
                  DYNAMICCL_NCCL_NUM_PROTOS == NCCL_NUM_PROTOCOLS,
              "protocol ids");

namespace dynamiccl {
namespace nccl_plugin {
namespace {

// Indexed by ncclFunc_t, NCCL_ALGO_* and NCCL_PROTO_*.
const char* const kCollNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
const char* const kAlgoNames[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                  "NVLSTree", "PAT"};
const char* const kProtoNames[] = {"LL", "LL128", "Simple"};

template <int N>
const char* name_of(int id, const char* const (&names)[N]) {
  return id >= 0 && id < N ? names[id] : "unknown";
}

bool same_name(const char* nccl, const char* ours) {
  if (nccl == nullptr) return false;
  while (true) {
    while (*nccl == '_') ++nccl;
    if (std::tolower(static_cast<unsigned char>(*nccl)) !=
        std::tolower(static_cast<unsigned char>(*ours))) {
      return false;
    }
    if (*ours == '\0') return true;
    ++nccl;
    ++ours;
  }
}

template <int N>
int id_of(const char* name, const char* const (&names)[N]) {
  for (int i = 0; i < N; ++i) {
    if (same_name(name, names[i])) return i;
  }
  return -1;
}

}  // namespace

static_assert(sizeof(kCollNames) / sizeof(*kCollNames) == NCCL_NUM_FUNCTIONS, "collectives");
static_assert(sizeof(kAlgoNames) / sizeof(*kAlgoNames) == NCCL_NUM_ALGORITHMS, "algorithms");
static_assert(sizeof(kProtoNames) / sizeof(*kProtoNames) == NCCL_NUM_PROTOCOLS, "protocols");

const char* coll_name(int coll_type) { return name_of(coll_type, kCollNames); }
const char* algo_name(int algo) { return name_of(algo, kAlgoNames); }
const char* proto_name(int proto) { return name_of(proto, kProtoNames); }

int coll_id(const char* name) { return id_of(name, kCollNames); }
int algo_id(const char* name) { return id_of(name, kAlgoNames); }
int proto_id(const char* name) { return id_of(name, kProtoNames); }

}  // namespace nccl_plugin
}  // namespace dynamiccl
