// NCCL's own cost model of collectives (src/graph/tuning.cc in NCCL 2.28), reimplemented from
// its published description: per (function, algorithm, protocol) a latency and an algorithm
// bandwidth computed once per communicator from the topology search's outputs, and per call
// time = latency + bytes / bandwidth with NCCL's tree correction and ring plateau factors.
// A library of its own (torch-free): the product's NCCL prior and arm catalog are this model on
// the topology a group describes (engines/nccl/arm_catalog.h), and the simulator uses it as
// NCCL's belief (which picks "NCCL default") and, fed with congested inputs and perturbed by the
// scenario, as the truth. The names of NCCL's algorithms and protocols are defined here, once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/types.h"
#include "nccl_plugin/dynamiccl_nccl.h"  // NCCL's ids, declared once (checked against NCCL's ABI)

namespace dynamiccl {
namespace nccl {

// NCCL's enum values (the plugin's public header, which nccl_names.cpp checks against NCCL's
// own): the decisions the plugin hands NCCL carry these.
enum NcclAlgo : int {
  kAlgoTree = DYNAMICCL_NCCL_ALGO_TREE,
  kAlgoRing = DYNAMICCL_NCCL_ALGO_RING,
  kAlgoCollNetDirect = DYNAMICCL_NCCL_ALGO_COLLNET_DIRECT,
  kAlgoCollNetChain = DYNAMICCL_NCCL_ALGO_COLLNET_CHAIN,
  kAlgoNvls = DYNAMICCL_NCCL_ALGO_NVLS,
  kAlgoNvlsTree = DYNAMICCL_NCCL_ALGO_NVLS_TREE,
  kAlgoPat = DYNAMICCL_NCCL_ALGO_PAT,
  kNumAlgos = DYNAMICCL_NCCL_NUM_ALGOS
};
enum NcclProto : int {
  kProtoLL = DYNAMICCL_NCCL_PROTO_LL,
  kProtoLL128 = DYNAMICCL_NCCL_PROTO_LL128,
  kProtoSimple = DYNAMICCL_NCCL_PROTO_SIMPLE,
  kNumProtos = DYNAMICCL_NCCL_NUM_PROTOS
};
// ncclFunc_t values the tuner sees.
enum NcclFunc : int {
  kFuncBroadcast = DYNAMICCL_NCCL_COLL_BROADCAST,
  kFuncReduce = DYNAMICCL_NCCL_COLL_REDUCE,
  kFuncAllGather = DYNAMICCL_NCCL_COLL_ALLGATHER,
  kFuncReduceScatter = DYNAMICCL_NCCL_COLL_REDUCESCATTER,
  kFuncAllReduce = DYNAMICCL_NCCL_COLL_ALLREDUCE,
  kNumFuncs = DYNAMICCL_NCCL_NUM_COLLS
};

// The product's names (arm names, policy files, DYNAMICCL_FORCE); NCCL's own spellings ("Tree",
// "CollNetDirect"), for its logs and NCCL_ALGO, are the plugin's (nccl_plugin/nccl_names.h).
const char* algo_name(int algo);    // "tree", "ring", "collnet_direct", ..., "pat"
const char* proto_name(int proto);  // "LL", "LL128", "Simple"
std::vector<std::string> algo_names();
std::vector<std::string> proto_names();
bool parse_algo(const std::string& name, int* out);   // case-insensitive
bool parse_proto(const std::string& name, int* out);  // case-insensitive
// The tuner function of an op, or -1 for ops NCCL's tuner never sees (send, alltoall, ...).
int func_of(OpKind op);

// NCCL's chunk for a protocol before a tuner speaks: its step buffer (the plugin's header holds
// the sizes, so that the plugin, the catalog and the emulated NCCL agree); 0 for an unknown one.
size_t default_chunk_bytes(int proto);

enum CompCap : int { kVolta = 0, kAmpere = 1, kHopper = 2, kBlackwell = 3, kNumCompCaps = 4 };

// What the topology search hands the tuning model for one algorithm's graph.
struct GraphInputs {
  int n_channels = 0;
  double bw_intra = 0;  // GB/s per channel
  double bw_inter = 0;  // GB/s per channel
};

// Everything ncclTopoTuneModel reads, for one communicator.
struct CommInputs {
  int n_ranks = 0;
  int n_nodes = 0;
  int compcap = kHopper;
  bool cpu_amd = false;
  bool intra_nvlink = true;      // graph typeIntra is NVLink (else PCI)
  double intra_extra_us = 0;     // added to every intra-node hop latency
  double latency_inter_us = 0;   // the network's latency (net plugin property)
  double intra_lat_scale = 1;    // congestion: multiplies intra-node hop latency
  double inter_lat_scale = 1;    // congestion: multiplies inter-node hop latency
  bool same_channels = true;     // ring graph duplicated per channel (broadcast/reduce latency)
  bool nvls_supported = false;   // NVSwitch + Hopper or newer + >= 2 GPUs per node
  bool collnet_enabled = false;  // SHARP-like in-network reduction
  bool ll128_enabled = true;     // NCCL's LL128 auto-enable outcome
  bool pat_enabled = false;      // one GPU per node
  GraphInputs graphs[kNumAlgos];
};

// Per-call terms of the model for one (func, algo, proto).
struct ModelTerms {
  double lat_us = 0;   // latency including the ring plateau factor
  double bw_GBps = 0;  // algorithm bandwidth including the tree correction
};

class NcclCostModel {
 public:
  NcclCostModel() = default;
  explicit NcclCostModel(const CommInputs& in);

  const CommInputs& inputs() const { return in_; }
  bool available(int func, int algo, int proto) const { return bw_[func][algo][proto] > 0; }
  // Bandwidth (GB/s) and latency (us) as tuned at init, before per-call factors.
  double base_bandwidth(int func, int algo, int proto) const { return bw_[func][algo][proto]; }
  double base_latency(int func, int algo, int proto) const { return lat_[func][algo][proto]; }
  // Per-call terms; false when the combination is unavailable.
  bool terms(int func, int algo, int proto, uint64_t bytes, ModelTerms* out) const;
  // NCCL's predicted time in us, or -1 when unavailable (NCCL's IGNORE).
  double time_us(int func, int algo, int proto, uint64_t bytes) const;
  // NCCL's own choice: strict minimum, ties to the lower algorithm then protocol id.
  // Returns false when nothing is available.
  bool pick(int func, uint64_t bytes, int* algo, int* proto) const;
  // Channels NCCL actually uses for a call (its per-call shrink for small messages),
  // starting from `cap` (<= the graph's channel count).
  int channels_used(int algo, int proto, uint64_t bytes, int cap) const;
  // The model's time in us for an explicit choice of a tuner op (algo/proto >= 0, channels a cap
  // or -1; the default action = NCCL's own pick), bandwidth scaled by the capped share of
  // channels. -1 when unavailable or not a collective NCCL's tuner sees.
  // A chunk size (action.chunk_bytes > 0) adds chunk_delta_us; without one the result is
  // exactly the chunk-less model's.
  double predict_us(OpKind op, const Action& action, uint64_t bytes) const;
  // What a chunk size changes in the time of a call, relative to the protocol's default chunk
  // (default_chunk_bytes), for a call of `bytes` on `channels` channels of algorithm bandwidth
  // `bw_GBps` over all of the graph's `graph_channels`, through a pipeline `depth` hops deep (the
  // communicator's ranks - 1). A simple pipelining model: each channel moves bytes / channels in
  // steps of one chunk; filling the pipeline costs depth x chunk / (per-channel bandwidth) and
  // every step costs kChunkStepUs. A smaller chunk fills faster and pays more steps: it helps
  // large calls (up to a point: tiny chunks drown in steps); a chunk at or above a channel's
  // share changes nothing. Exactly 0 for the default chunk or chunk_bytes <= 0.
  static double chunk_delta_us(int proto, int chunk_bytes, uint64_t bytes, int channels,
                               int graph_channels, double bw_GBps, int depth);
  static constexpr double kChunkStepUs = 0.2;
  int graph_channels(int algo) const { return in_.graphs[algo].n_channels; }

 private:
  void tune();               // ncclTopoTuneModel
  void set_thread_limits();  // its maxThreads and threadThresholds
  CommInputs in_;
  float bw_[kNumFuncs][kNumAlgos][kNumProtos] = {};
  float lat_[kNumFuncs][kNumAlgos][kNumProtos] = {};
  int max_threads_[kNumAlgos][kNumProtos] = {};
  int thread_threshold_[kNumAlgos][kNumProtos] = {};
};

}  // namespace nccl
}  // namespace dynamiccl
