#include "nccl_model/topology.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dynamiccl {
namespace nccl {

namespace {

constexpr const char* kLinkNames[kNumLinkTypes] = {"nvlink", "pcie", "ib", "roce", "ethernet"};
constexpr const char* kCompcapNames[kNumCompCaps] = {"volta", "ampere", "hopper", "blackwell"};
constexpr const char* kCpuNames[2] = {"intel", "amd"};
// NCCL's per-link NVLink reference speeds (GB/s) by compcap, and its 100 Gb/s NIC speed:
// the unit the topology search counts channels in.
constexpr double kNvlinkRef[kNumCompCaps] = {20.0, 20.0, 20.6, 40.1};
constexpr double kNetRef = 12.0;
constexpr double kNvlinkPerGpu[kNumCompCaps] = {120.0, 240.0, 370.0, 720.0};
constexpr double kNicPerGpu[kNumCompCaps] = {12.5, 25.0, 50.0, 50.0};
constexpr double kPcie = 24.0;
constexpr double kAssumedNetLatUs = 2.0;
constexpr double kUnbounded = 1e12;  // "no such link in this group"
// What a single node (no network) gets for its inter-node link: no group ever crosses it.
const LinkSpec kNoNetwork{"ib", 50.0, 2.0};

int pow2_floor(double v) {
  int p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("topology: " + what); }

}  // namespace

const char* link_type_name(LinkType t) { return kLinkNames[static_cast<int>(t)]; }

bool parse_link_type(const std::string& name, LinkType* out) {
  for (int i = 0; i < kNumLinkTypes; ++i) {
    if (name == kLinkNames[i]) {
      *out = static_cast<LinkType>(i);
      return true;
    }
  }
  return false;
}

bool is_intra_node(LinkType t) { return t == LinkType::kNvlink || t == LinkType::kPcie; }

std::vector<std::string> link_type_names(bool intra_node) {
  std::vector<std::string> out;
  for (int i = 0; i < kNumLinkTypes; ++i) {
    if (is_intra_node(static_cast<LinkType>(i)) == intra_node) out.push_back(kLinkNames[i]);
  }
  return out;
}

const char* compcap_name(int compcap) {
  return compcap >= 0 && compcap < kNumCompCaps ? kCompcapNames[compcap] : "unknown";
}

std::vector<std::string> compcap_names() {
  return std::vector<std::string>(kCompcapNames, kCompcapNames + kNumCompCaps);
}

const char* cpu_name(bool amd) { return kCpuNames[amd ? 1 : 0]; }

std::vector<std::string> cpu_names() { return {kCpuNames[0], kCpuNames[1]}; }

bool parse_cpu(const std::string& name, bool* amd) {
  for (bool a : {false, true}) {
    if (name == cpu_name(a)) {
      *amd = a;
      return true;
    }
  }
  return false;
}

bool parse_compcap(const std::string& name, int* out) {
  for (int i = 0; i < kNumCompCaps; ++i) {
    if (name == kCompcapNames[i]) {
      *out = i;
      return true;
    }
  }
  return false;
}

Topology resolve_topology(const TopologySpec& s) {
  Topology t;
  if (s.nodes < 1 || s.nodes > 100000) bad("nodes must be in [1, 100000]");
  if (s.gpus_per_node < 1 || s.gpus_per_node > 72) bad("gpus_per_node must be in [1, 72]");
  if (static_cast<long long>(s.nodes) * s.gpus_per_node > 1000000) bad("too many ranks");
  t.nodes = s.nodes;
  t.gpus_per_node = s.gpus_per_node;
  if (!parse_compcap(s.gpu, &t.compcap))
    bad("gpu '" + s.gpu + "' (accepted: " + join_names(compcap_names()) + ")");
  if (!parse_cpu(s.cpu, &t.cpu_amd))
    bad("cpu '" + s.cpu + "' (accepted: " + join_names(cpu_names()) + ")");
  const LinkSpec& inter = s.inter.type.empty() && s.nodes == 1 ? kNoNetwork : s.inter;
  if (!parse_link_type(s.intra.type, &t.intra) || !is_intra_node(t.intra))
    bad("intra.type '" + s.intra.type + "' (accepted: " + join_names(link_type_names(true)) + ")");
  if (!parse_link_type(inter.type, &t.inter) || is_intra_node(t.inter))
    bad("inter.type '" + inter.type + "' (accepted: " + join_names(link_type_names(false)) + ")");
  if (!(s.intra.bw_GBps > 0) || !std::isfinite(s.intra.bw_GBps)) bad("intra.bw_GBps must be > 0");
  if (!(inter.bw_GBps > 0) || !std::isfinite(inter.bw_GBps)) bad("inter.bw_GBps must be > 0");
  if (!(s.intra.lat_us >= 0) || !std::isfinite(s.intra.lat_us)) bad("intra.lat_us must be >= 0");
  if (!(inter.lat_us >= 0) || !std::isfinite(inter.lat_us)) bad("inter.lat_us must be >= 0");
  t.intra_bw = s.intra.bw_GBps;
  t.inter_bw = inter.bw_GBps;
  t.intra_lat = s.intra.lat_us;
  t.inter_lat = inter.lat_us;
  t.nvswitch = s.nvswitch && t.intra == LinkType::kNvlink;
  if (s.sharp && t.inter != LinkType::kIb) bad("sharp needs inter.type 'ib'");
  t.sharp = s.sharp;
  if (s.channels < 0 || s.channels > 64) bad("channels must be in [0, 64] (0 = derive)");
  if (s.min_channels < 0 || s.min_channels > 64) bad("min_channels must be in [0, 64] (0 = none)");
  if (s.max_channels < 0 || s.max_channels > 64) bad("max_channels must be in [0, 64] (0 = none)");
  t.channels = s.channels;
  t.min_channels = s.min_channels;
  t.max_channels = s.max_channels;
  return t;
}

double assumed_bw_GBps(LinkType type, int compcap) {
  if (compcap < 0 || compcap >= kNumCompCaps) bad("compcap " + std::to_string(compcap));
  if (type == LinkType::kNvlink) return kNvlinkPerGpu[compcap];
  if (type == LinkType::kPcie) return kPcie;
  return kNicPerGpu[compcap];
}

TopologySpec described_topology(int nodes, int gpus_per_node, int compcap, bool pcie) {
  TopologySpec s;
  s.nodes = nodes;
  s.gpus_per_node = gpus_per_node;
  s.gpu = compcap_name(compcap);
  const LinkType intra = pcie ? LinkType::kPcie : LinkType::kNvlink;
  s.intra = {link_type_name(intra), assumed_bw_GBps(intra, compcap), 0.0};
  s.inter = {link_type_name(LinkType::kIb), assumed_bw_GBps(LinkType::kIb, compcap),
             kAssumedNetLatUs};
  s.nvswitch = !pcie;
  return s;
}

// The search fills links with channels of one reference link's speed: NVLink per-GPU
// bandwidth / NCCL's per-link NVLink speed inside a node (PCIe: 2 channels, NCCL's usual
// count there), the group's NIC bandwidth / 12 GB/s across nodes; powers of two in [2, 32].
namespace {
int channels_of_links(const Topology& topo, const GroupShape& g) {
  int intra_ch = 32, net_ch = 32;
  if (g.gpus_per_node > 1) {
    intra_ch = topo.intra == LinkType::kNvlink
                   ? std::clamp(pow2_floor(topo.intra_bw / kNvlinkRef[topo.compcap]), 2, 32)
                   : 2;
  }
  if (g.nodes > 1)
    net_ch = std::clamp(pow2_floor(g.gpus_per_node * topo.inter_bw / kNetRef), 2, 32);
  return std::min(intra_ch, net_ch);
}
}  // namespace

// Then NCCL's own bounds, in its order: at most the maximum, then copies up to the minimum.
int derive_channels(const Topology& topo, const GroupShape& g) {
  if (topo.channels > 0) return topo.channels;
  int n = channels_of_links(topo, g);
  if (topo.max_channels > 0) n = std::min(n, topo.max_channels);
  if (topo.min_channels > 0) n = std::max(n, topo.min_channels);
  return n;
}

// Per-channel bandwidths: a channel crosses each node boundary once, so the node's NICs
// (GPUs in the group x per-GPU bandwidth) bound rings; a tree's intra-node part can run at
// twice the network rate on two nodes (NCCL's split tree), and so can in-network reduction.
CommInputs derive_comm_inputs(const Topology& topo, const GroupShape& g, const LinkScale& s) {
  CommInputs in;
  in.n_nodes = g.nodes;
  in.n_ranks = g.ranks();
  in.compcap = topo.compcap;
  in.cpu_amd = topo.cpu_amd;
  in.intra_nvlink = topo.intra == LinkType::kNvlink;
  in.intra_extra_us = topo.intra_lat;
  in.latency_inter_us = topo.inter_lat;
  in.intra_lat_scale = s.intra_lat;
  in.inter_lat_scale = s.inter_lat;
  in.same_channels = g.nodes == 1;
  in.nvls_supported = topo.nvswitch && topo.compcap >= kHopper && g.gpus_per_node >= 2;
  in.collnet_enabled = topo.sharp && g.nodes > 1;
  in.ll128_enabled = topo.intra == LinkType::kNvlink || g.gpus_per_node == 1;
  in.pat_enabled = g.gpus_per_node == 1 && g.nodes > 1;

  const int nch = derive_channels(topo, g);
  const double intra = g.gpus_per_node > 1 ? topo.intra_bw * s.intra_bw : kUnbounded;
  const double net = g.nodes > 1 ? g.gpus_per_node * topo.inter_bw * s.inter_bw : kUnbounded;
  const double flat = std::min(intra, net) / nch;
  for (int a = 0; a < kNumAlgos; ++a) {
    GraphInputs& gi = in.graphs[a];
    gi.n_channels = nch;
    gi.bw_intra = flat;
    gi.bw_inter = flat;
  }
  in.graphs[kAlgoTree].bw_intra = (g.nodes == 1 ? intra : std::min(intra, 2 * net)) / nch;
  for (int a : {kAlgoNvls, kAlgoNvlsTree}) {
    in.graphs[a].bw_intra = intra / nch;
    in.graphs[a].bw_inter = net / nch;
  }
  for (int a : {kAlgoCollNetDirect, kAlgoCollNetChain}) {
    in.graphs[a].bw_intra = std::min(intra, 2 * net) / nch;
    in.graphs[a].bw_inter = net / nch;
  }
  return in;
}

}  // namespace nccl
}  // namespace dynamiccl
