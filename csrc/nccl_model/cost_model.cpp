#include "nccl_model/cost_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace dynamiccl {
namespace nccl {

namespace {

// NCCL 2.28.9 tuning constants (latencies in us, bandwidths in GB/s): each table is the
// like-named default of NCCL's src/graph/tuning.cc (base and hardware latencies, llMaxBws, the
// perChMax*Bws caps, nvlsEfficiency, treeCorrectionFactor).
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

constexpr float kBaseLat[kNumAlgos][kNumProtos] = {
    {6.8f, 14.0f, 8.4f},  // tree
    {6.6f, 14.0f, 8.4f},  // ring
    {0, 0, 0},            // collnet direct
    {0, 0, 0},            // collnet chain
    {0, 0, 0},            // nvls
    {0, 0, 0},            // nvls tree
    {8.0f, 8.0f, 8.0f},   // pat
};

constexpr float kHwLat[3][kNumAlgos][kNumProtos] = {
    {// NVLink
     {0.6f, 1.25f, 4.0f},
     {0.6f, 1.9f, 3.4f},
     {0, 0, 3.7f},
     {0, 0, 2.8f},
     {0, 0, 25.0f},
     {0, 0, 25.0f},
     {0, 0, 4.0f}},
    {// PCI
     {1.0f, 1.9f, 4.0f},
     {1.0f, 2.5f, 5.7f},
     {0, 0, 3.7f},
     {0, 0, 2.8f},
     {0, 0, 0},
     {0, 0, 0},
     {0, 0, 4.0f}},
    {// network
     {5.0f, 8.5f, 14.0f},
     {2.7f, 4.0f, 14.0f},
     {0, 0, 31.0f},
     {0, 0, 30.0f},
     {0, 0, 18.0f},
     {0, 0, 20.9f},
     {0, 0, 14.0f}},
};

// Rows: compcap (Volta, Ampere, Hopper, Blackwell); columns: 1 node, 2 nodes, >= 3 nodes.
constexpr double kLlMaxBw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8}};
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};

// Tree all-reduce bandwidth correction, index log2(bytes / 64), 64 B .. 256 MiB.
constexpr int kTreeCorrectionLen = 23;
constexpr float kTreeCorrection[kNumProtos][kTreeCorrectionLen] = {
    {1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .7f, .7f,  .7f,  .7f,  .6f, .5f,
     .4f,  .4f,  .5f,  .6f,  .7f, .8f, .9f, 1.0f, 1.0f, 1.0f, 1.0f},
    {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, .9f, .8f, .8f, .8f, .7f,  .6f, .6f,
     .6f,  .6f,  .6f,  .6f,  .8f,  .9f, .9f, .9f, .9f, 1.0f, 1.0f},
    {.9f, .9f, .9f, .9f, .9f, .9f, .9f, .8f, .7f, .6f, .6f, .5f,
     .5f, .5f, .5f, .6f, .7f, .8f, .7f, .7f, .8f, .9f, .9f},
};

// Thread counts and per-thread work thresholds that drive the per-call channel shrink.
constexpr int kSimpleMaxThreads = 512, kMaxThreads = 640, kLLMaxThreads = 512,
              kLL128MaxThreads = 640;
constexpr int kLLThreshold = 8, kLL128Threshold = 8, kSimpleThreshold = 64;
constexpr double kPciBw = 12.0;  // NCCL's PCI Gen3 x16 reference speed

constexpr const char* kAlgoNames[kNumAlgos] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
constexpr const char* kProtoNames[kNumProtos] = {"LL", "LL128", "Simple"};

bool iequals(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return i == a.size() && b[i] == 0;
}

int log2i(uint64_t v) {  // floor(log2(v)); -1 for 0
  int r = -1;
  while (v) {
    v >>= 1;
    ++r;
  }
  return r;
}

bool is_ag_rs(int f) { return f == kFuncAllGather || f == kFuncReduceScatter; }

}  // namespace

const char* algo_name(int algo) {
  return algo >= 0 && algo < kNumAlgos ? kAlgoNames[algo] : "undef";
}
const char* proto_name(int proto) {
  return proto >= 0 && proto < kNumProtos ? kProtoNames[proto] : "undef";
}
std::vector<std::string> algo_names() {
  return std::vector<std::string>(kAlgoNames, kAlgoNames + kNumAlgos);
}
std::vector<std::string> proto_names() {
  return std::vector<std::string>(kProtoNames, kProtoNames + kNumProtos);
}
bool parse_algo(const std::string& name, int* out) {
  for (int a = 0; a < kNumAlgos; ++a) {
    if (iequals(name, kAlgoNames[a])) {
      *out = a;
      return true;
    }
  }
  return false;
}
bool parse_proto(const std::string& name, int* out) {
  for (int p = 0; p < kNumProtos; ++p) {
    if (iequals(name, kProtoNames[p])) {
      *out = p;
      return true;
    }
  }
  return false;
}

int func_of(OpKind op) {
  switch (op) {
    case OpKind::kBroadcast: return kFuncBroadcast;
    case OpKind::kReduce: return kFuncReduce;
    case OpKind::kAllGather: return kFuncAllGather;
    case OpKind::kReduceScatter: return kFuncReduceScatter;
    case OpKind::kAllReduce: return kFuncAllReduce;
    default: return -1;
  }
}

NcclCostModel::NcclCostModel(const CommInputs& in) : in_(in) { tune(); }

namespace {

// What ncclTopoTuneModel derives once per communicator before its loop: the compcap and node
// count indices (compCapIndex, index2, index1), the table entries they pick, ppn and hardware.
struct TuneScope {
  const CommInputs& in;
  int cc;
  double ll_max_bw;
  double per_ch_tree;
  double per_ch_ring_ll128;
  double per_ch_tree_ll128;
  double per_ch_nvls_tree;
  double ppn;
  int ippn;
  int intra_hw;
  int hw;
  double net_overhead;
  int log_nodes;
};

TuneScope tune_scope(const CommInputs& in) {
  const int n_ranks = in.n_ranks, n_nodes = in.n_nodes;
  const int cc = std::clamp(in.compcap, 0, 3);
  const int scale = n_nodes <= 2 ? n_nodes - 1 : 2;
  const int ll_row = n_nodes == 1 ? cc : (in.cpu_amd ? 1 : 0);
  const int intra_hw = in.intra_nvlink ? kHwNvlink : kHwPci;
  return TuneScope{in,
                   cc,
                   kLlMaxBw[ll_row][scale],
                   kPerChMaxTreeBw[cc][scale],
                   kPerChMaxRingLL128Bw[cc][scale],
                   kPerChMaxTreeLL128Bw[cc][scale],
                   kPerChMaxNvlsTreeBw[cc][scale],
                   static_cast<double>(n_ranks) / n_nodes,
                   n_ranks / n_nodes,
                   intra_hw,
                   n_nodes == 1 ? intra_hw : kHwNet,
                   in.cpu_amd ? 2.0 : 1.0,
                   log2i(static_cast<uint64_t>(n_nodes))};
}

// NCCL: nsteps, the ring steps of one call of the function.
int ring_steps(int f, int n_ranks) {
  return f == kFuncAllReduce ? 2 * (n_ranks - 1) : is_ag_rs(f) ? n_ranks - 1 : n_ranks;
}

// NCCL: the loop's `continue`s, the (function, algorithm, protocol) triples it models.
bool modelled(const CommInputs& in, int f, int a, int p) {
  if ((f == kFuncBroadcast || f == kFuncReduce) && a != kAlgoRing) return false;
  if (is_ag_rs(f) && a != kAlgoPat && a != kAlgoRing && a != kAlgoNvls && a != kAlgoCollNetDirect)
    return false;
  if (f == kFuncAllReduce && a == kAlgoPat) return false;
  if ((a == kAlgoNvls || a == kAlgoNvlsTree) && p != kProtoSimple) return false;
  if (a == kAlgoPat && (p != kProtoSimple || !in.pat_enabled)) return false;
  // NVLS/NVLSTree needs at least 2 channels.
  return !((a == kAlgoNvls || a == kAlgoNvlsTree) && in.graphs[a].n_channels < 2);
}

// NCCL: bw per channel, intra- or inter-node, converted to NVLS busBW/channel for NVLS.
double channel_bw(const TuneScope& s, int f, int a) {
  const GraphInputs& g = s.in.graphs[a];
  const bool collnet = a == kAlgoCollNetDirect || a == kAlgoCollNetChain;
  double bw = s.in.n_nodes <= 2 || collnet ? g.bw_intra : g.bw_inter;
  if (a == kAlgoNvls || a == kAlgoNvlsTree) {
    double intra_bw = g.bw_intra * kNvlsEfficiency[s.cc] * (g.n_channels - 1) / g.n_channels;
    intra_bw *= f == kFuncAllReduce ? 2.0 : (s.ppn - 1) / s.ppn;
    const double inter_bw = g.bw_inter * ((s.in.n_nodes <= 2 && a == kAlgoNvlsTree) ? 2.0 : 1.0);
    bw = std::min({intra_bw, inter_bw,
                   a == kAlgoNvlsTree ? s.per_ch_nvls_tree : std::numeric_limits<double>::max()});
  }
  return bw;
}

// NCCL: "Various model refinements" of busBw, and the CollNet/NVLS all-gather and
// reduce-scatter disables.
double refine_bus_bw(const TuneScope& s, int f, int a, int p, double bus_bw) {
  const GraphInputs& g = s.in.graphs[a];
  const bool collnet = a == kAlgoCollNetDirect || a == kAlgoCollNetChain;
  if (a == kAlgoRing && p == kProtoLL) bus_bw = std::min(s.ll_max_bw, bus_bw * 0.5);
  if (a == kAlgoRing && p == kProtoLL128)
    bus_bw = std::min(bus_bw * 0.92, g.n_channels * s.per_ch_ring_ll128);
  if (a == kAlgoTree && f == kFuncAllReduce)
    bus_bw = std::min(bus_bw * 0.92, g.n_channels * s.per_ch_tree);
  if (a == kAlgoTree && p == kProtoLL) bus_bw = std::min(bus_bw / 3.8, s.ll_max_bw);
  if (a == kAlgoTree && p == kProtoLL128)
    bus_bw = std::min(bus_bw * (s.in.n_nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                      g.n_channels * s.per_ch_tree_ll128);
  if (a == kAlgoPat) bus_bw *= 0.75;
  if (collnet && p != kProtoSimple) bus_bw = 0;
  if (a == kAlgoCollNetDirect && p == kProtoSimple) {
    if (is_ag_rs(f)) {
      bus_bw = s.ppn * std::min(g.bw_intra, g.bw_inter * 0.9);
    } else {
      double factor = s.ppn / g.n_channels;  // GPUs per NIC
      factor -= (factor - 1) / 2;
      bus_bw /= factor;
      if (s.cc >= kHopper) bus_bw *= 0.85;
    }
  }
  // Across nodes, NVLS / CollNetDirect all-gather and reduce-scatter need a CollNet
  // plugin with those collectives; the simulated fabric offers none.
  if ((a == kAlgoNvls || a == kAlgoCollNetDirect) && is_ag_rs(f) && s.in.n_nodes > 1) bus_bw = 0;
  return bus_bw;
}

// NCCL: "Convert bus BW to algorithm BW".
double algo_bw(int f, int a, int n_ranks, int nsteps, double bus_bw) {
  if (!(a != kAlgoRing && is_ag_rs(f))) {
    const bool per_step = a == kAlgoRing || a == kAlgoNvls || a == kAlgoNvlsTree;
    bus_bw *= per_step ? static_cast<double>(n_ranks) / nsteps : 0.5;
  }
  return bus_bw;
}

// NCCL: the ring's share of latencies[coll][a][p] (hwLat per step, netOverhead across nodes).
double ring_latency(const TuneScope& s, int f, int p, int nsteps, double intra_lat,
                    double inter_lat) {
  const CommInputs& in = s.in;
  const int n_nodes = in.n_nodes;
  double hop = (kHwLat[s.hw][kAlgoRing][p] + (n_nodes == 1 ? in.intra_extra_us : 0.0)) *
               (n_nodes == 1 ? in.intra_lat_scale : in.inter_lat_scale);
  if (f == kFuncReduce || f == kFuncBroadcast) {
    if (in.same_channels) return hop;
    if (p == kProtoSimple)
      hop = (kHwLat[s.hw][kAlgoTree][p] + (n_nodes == 1 ? in.intra_extra_us : 0.0)) *
            (n_nodes == 1 ? in.intra_lat_scale : in.inter_lat_scale);
    return nsteps * hop;
  }
  double overhead = 0;
  if (n_nodes > 1) overhead = s.net_overhead * (p == kProtoSimple ? 3.0 : 1.0);
  intra_lat = std::max(intra_lat, overhead);
  const int inter_steps = n_nodes == 1 ? 0 : f == kFuncAllReduce ? 2 * (n_nodes - 1) : n_nodes - 1;
  return (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
}

// NCCL: latencies[coll][a][p], baseLatencies plus each algorithm's intra- and inter-node hops.
double latency(const TuneScope& s, int f, int a, int p, int nsteps) {
  const CommInputs& in = s.in;
  double lat = kBaseLat[a][p];
  const double intra_lat = (kHwLat[s.intra_hw][a][p] + in.intra_extra_us) * in.intra_lat_scale;
  // With ppn=1 latencies are fully exposed: the tree's network latency.
  double inter_lat = s.ippn == 1 ? kHwLat[kHwNet][kAlgoTree][p] : kHwLat[kHwNet][a][p];
  inter_lat += in.latency_inter_us;
  if (p == kProtoSimple) inter_lat += in.latency_inter_us;  // flush
  inter_lat *= in.inter_lat_scale;
  const int ippn = s.ippn, log_nodes = s.log_nodes;
  if (a == kAlgoRing) {
    lat += ring_latency(s, f, p, nsteps, intra_lat, inter_lat);
  } else if (a == kAlgoTree) {
    if (f == kFuncAllReduce) lat += 2 * ((ippn - 1) * intra_lat + log_nodes * inter_lat);
  } else if (a == kAlgoCollNetDirect) {
    lat += 2 * (std::min(1, ippn - 1) * intra_lat + (ippn - 1) * 0.4) + inter_lat;
  } else if (a == kAlgoCollNetChain) {
    lat += 2 * (ippn - 1) * intra_lat + inter_lat;
  } else if (a == kAlgoNvls) {
    lat = intra_lat + (in.n_nodes > 1 ? inter_lat : 0.0);
  } else if (a == kAlgoNvlsTree) {
    lat += intra_lat + 2 * log_nodes * inter_lat;
  } else if (a == kAlgoPat) {
    lat += log_nodes * (inter_lat / 3.5) + in.n_ranks * 2.8;
  }
  return lat;
}

// NCCL: "Protocols/Algorithms enable/disable". NVLS needs its hardware, NVLSTree more than one
// node, CollNet (and NVLS across nodes) in-network reduction, CollNetDirect NVSwitch; LL128
// NCCL's auto rule.
bool enabled(const CommInputs& in, int a, int p) {
  const bool collnet = a == kAlgoCollNetDirect || a == kAlgoCollNetChain;
  bool on = true;
  if ((a == kAlgoNvls || a == kAlgoNvlsTree) && !in.nvls_supported) on = false;
  if (a == kAlgoNvlsTree && in.n_nodes == 1) on = false;
  if ((collnet || (a == kAlgoNvls && in.n_nodes > 1)) && !in.collnet_enabled) on = false;
  if (a == kAlgoCollNetDirect && !in.nvls_supported) on = false;
  if (p == kProtoLL128 && !in.ll128_enabled) on = false;
  return on;
}

}  // namespace

// NCCL: maxThreads (simpleDefaultThreads) and threadThresholds, its "per-thread amount of work
// before we increase nThreads and nChannels".
void NcclCostModel::set_thread_limits() {
  const GraphInputs& ring = in_.graphs[kAlgoRing];
  const int ring_simple_threads = ring.bw_intra * ring.n_channels <= kPciBw ? 256
                                                                            : kSimpleMaxThreads;
  for (int a = 0; a < kNumAlgos; ++a) {
    max_threads_[a][kProtoLL] = kLLMaxThreads;
    max_threads_[a][kProtoLL128] = kLL128MaxThreads;
    max_threads_[a][kProtoSimple] = kMaxThreads;
    thread_threshold_[a][kProtoLL] = kLLThreshold;
    thread_threshold_[a][kProtoLL128] = kLL128Threshold;
    thread_threshold_[a][kProtoSimple] = kSimpleThreshold;
  }
  max_threads_[kAlgoRing][kProtoSimple] = ring_simple_threads;
  max_threads_[kAlgoTree][kProtoSimple] = kSimpleMaxThreads;
  thread_threshold_[kAlgoRing][kProtoLL] *= std::max(1, in_.n_ranks);
  thread_threshold_[kAlgoCollNetDirect][kProtoSimple] = 512;
  thread_threshold_[kAlgoCollNetChain][kProtoSimple] = 512;
}

// ncclTopoTuneModel: per (function, algorithm, protocol), NCCL's bandwidth and latency.
void NcclCostModel::tune() {
  set_thread_limits();
  if (in_.n_ranks <= 1 || in_.n_nodes < 1) return;  // nothing to communicate: all unavailable
  const TuneScope s = tune_scope(in_);
  for (int f = 0; f < kNumFuncs; ++f) {
    const int nsteps = ring_steps(f, in_.n_ranks);
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        if (!modelled(in_, f, a, p)) continue;
        double bus_bw = in_.graphs[a].n_channels * channel_bw(s, f, a);
        bus_bw = refine_bus_bw(s, f, a, p, bus_bw);
        bus_bw = algo_bw(f, a, in_.n_ranks, nsteps, bus_bw);
        const double lat = latency(s, f, a, p, nsteps);
        if (!std::isfinite(bus_bw) || bus_bw < 0) bus_bw = 0;
        bw_[f][a][p] = enabled(in_, a, p) ? static_cast<float>(bus_bw) : 0.f;
        lat_[f][a][p] = static_cast<float>(lat);
      }
    }
  }
}

bool NcclCostModel::terms(int func, int algo, int proto, uint64_t bytes, ModelTerms* out) const {
  double bw = bw_[func][algo][proto];
  if (bw <= 0) return false;
  double lat = lat_[func][algo][proto];
  const int log_size = log2i(bytes >> 6);
  if (algo == kAlgoTree && func == kFuncAllReduce && log_size >= 0 && log_size < kTreeCorrectionLen)
    bw *= kTreeCorrection[proto][log_size];
  if (algo == kAlgoRing && proto == kProtoSimple && in_.n_nodes > 1 && func == kFuncAllReduce) {
    const uint64_t per = static_cast<uint64_t>(in_.graphs[kAlgoRing].n_channels) *
                         static_cast<uint64_t>(in_.n_ranks);
    if (per > 0 && bytes / per >= 64) lat *= in_.compcap >= kAmpere ? 1.4 : 1.9;
  }
  out->lat_us = lat;
  out->bw_GBps = bw;
  return true;
}

double NcclCostModel::time_us(int func, int algo, int proto, uint64_t bytes) const {
  ModelTerms t;
  if (!terms(func, algo, proto, bytes, &t)) return -1.0;
  return t.lat_us + static_cast<double>(bytes) / (1000.0 * t.bw_GBps);
}

bool NcclCostModel::pick(int func, uint64_t bytes, int* algo, int* proto) const {
  double best = -1;
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      const double t = time_us(func, a, p, bytes);
      if (t < 0) continue;
      if (best < 0 || t < best) {
        best = t;
        *algo = a;
        *proto = p;
      }
    }
  }
  return best >= 0;
}

int NcclCostModel::channels_used(int algo, int proto, uint64_t bytes, int cap) const {
  int nc = std::max(1, std::min(cap, in_.graphs[algo].n_channels));
  if (algo != kAlgoRing && algo != kAlgoTree) return nc;
  const uint64_t per = static_cast<uint64_t>(max_threads_[algo][proto]) *
                       static_cast<uint64_t>(thread_threshold_[algo][proto]);
  while (nc > 1 && bytes < static_cast<uint64_t>(nc) * per) --nc;
  return nc;
}

double NcclCostModel::predict_us(OpKind op, const Action& act, uint64_t bytes) const {
  const int f = func_of(op);
  if (f < 0) return -1.0;
  int a = act.algo, p = act.proto;
  if (act.is_default() && !pick(f, bytes, &a, &p)) return -1.0;
  if (a < 0 || a >= kNumAlgos || p < 0 || p >= kNumProtos) return -1.0;
  ModelTerms t;
  if (!terms(f, a, p, bytes, &t)) return -1.0;
  const int n = graph_channels(a);
  const int c = act.channels > 0 ? std::min<int>(act.channels, n) : n;
  const double t_us = t.lat_us + static_cast<double>(bytes) / (1000.0 * t.bw_GBps * c / n);
  if (act.chunk_bytes <= 0) return t_us;
  return t_us + chunk_delta_us(p, act.chunk_bytes, bytes, c, n, t.bw_GBps, in_.n_ranks - 1);
}

size_t default_chunk_bytes(int proto) {
  switch (proto) {
    case kProtoLL: return DYNAMICCL_NCCL_CHUNK_STEP_LL;
    case kProtoLL128: return DYNAMICCL_NCCL_CHUNK_STEP_LL128;
    case kProtoSimple: return DYNAMICCL_NCCL_CHUNK_STEP_SIMPLE;
    default: return 0;
  }
}

double NcclCostModel::chunk_delta_us(int proto, int chunk_bytes, uint64_t bytes, int channels,
                                     int graph_channels, double bw_GBps, int depth) {
  const double base = static_cast<double>(default_chunk_bytes(proto));
  if (chunk_bytes <= 0 || base <= 0 || channels <= 0 || graph_channels <= 0 || bw_GBps <= 0 ||
      depth <= 0) {
    return 0.0;
  }
  const double share = static_cast<double>(bytes) / channels;  // bytes per channel
  if (share <= 0) return 0.0;
  const double per_channel_GBps = bw_GBps / graph_channels;
  // `depth` chunks (each at most the channel's share) to fill the pipeline, plus a fixed cost per
  // step.
  const auto cost = [&](double chunk) {
    const double c = std::min(chunk, share);
    return depth * c / (1000.0 * per_channel_GBps) + kChunkStepUs * std::ceil(share / c);
  };
  return cost(static_cast<double>(chunk_bytes)) - cost(base);
}

}  // namespace nccl
}  // namespace dynamiccl
