// From a cluster description (nodes x GPUs per node, intra- and inter-node link classes) to
// the inputs NCCL's tuning model reads for one communicator. NCCL gets these from its topology
// search; here they are derived with a simple, documented rule (topology.cpp) so that the same
// cluster yields the same channel counts and per-channel bandwidths every time. The product
// describes the cluster it runs on (DYNAMICCL_TOPOLOGY or what the ranks agree on at group
// creation) and the simulator reads it from a scenario: the same TopologySpec.
#pragma once

#include <string>
#include <vector>

#include "nccl_model/cost_model.h"

namespace dynamiccl {
namespace nccl {

struct LinkSpec {
  std::string type;    // intra: "nvlink" | "pcie"; inter: "ib" | "roce" | "ethernet", "" = none
  double bw_GBps = 0;  // intra: per-GPU bandwidth; inter: network bandwidth per GPU
  double lat_us = 0;   // intra: added to each intra-node hop; inter: the network's latency
};

struct TopologySpec {
  int nodes = 1;
  int gpus_per_node = 8;
  std::string gpu = "hopper";  // volta | ampere | hopper | blackwell (NCCL's compcap classes)
  std::string cpu = "intel";   // intel | amd (NCCL's net overhead and LL bandwidth row)
  LinkSpec intra{"nvlink", 450.0, 0.0};
  LinkSpec inter;        // no network: one node
  bool nvswitch = true;  // NVLink through NVSwitch: NVLS / CollNetDirect possible
  bool sharp = false;    // in-network reduction (CollNet) on the inter-node fabric
  int channels = 0;      // communicator channel count; 0 = derived from the links
  // NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS: bounds NCCL puts on the derived count (0 = none).
  int min_channels = 0;
  int max_channels = 0;
};

enum class LinkType : int { kNvlink = 0, kPcie, kIb, kRoce, kEthernet };
constexpr int kNumLinkTypes = 5;
const char* link_type_name(LinkType t);
bool parse_link_type(const std::string& name, LinkType* out);
bool is_intra_node(LinkType t);  // NVLink and PCIe join a node's GPUs; the others join nodes
std::vector<std::string> link_type_names(bool intra_node);  // the types inside or between nodes
// The two link classes a congestion episode can hit.
constexpr const char kIntraLinks[] = "intra";
constexpr const char kInterLinks[] = "inter";
const char* compcap_name(int compcap);  // "volta", "ampere", "hopper", "blackwell" (CompCap)
std::vector<std::string> compcap_names();
bool parse_compcap(const std::string& name, int* out);
const char* cpu_name(bool amd);  // "intel" or "amd": NCCL's net overhead and LL bandwidth row
std::vector<std::string> cpu_names();
bool parse_cpu(const std::string& name, bool* amd);

// The ranks one communicator spans: `nodes` nodes with `gpus_per_node` GPUs each.
struct GroupShape {
  int nodes = 1;
  int gpus_per_node = 1;
  int ranks() const { return nodes * gpus_per_node; }
};

// Multipliers a congestion episode applies to a link class (1 = nominal).
struct LinkScale {
  double intra_bw = 1.0, inter_bw = 1.0;
  double intra_lat = 1.0, inter_lat = 1.0;
  bool operator==(const LinkScale& o) const {
    return intra_bw == o.intra_bw && inter_bw == o.inter_bw && intra_lat == o.intra_lat &&
           inter_lat == o.inter_lat;
  }
  bool operator!=(const LinkScale& o) const { return !(*this == o); }
};

// A validated cluster.
struct Topology {
  int nodes = 1;
  int gpus_per_node = 1;
  int compcap = kHopper;
  bool cpu_amd = false;
  LinkType intra = LinkType::kNvlink;
  LinkType inter = LinkType::kIb;
  double intra_bw = 0, inter_bw = 0;  // GB/s per GPU
  double intra_lat = 0, inter_lat = 0;
  bool nvswitch = true;
  bool sharp = false;
  int channels = 0;                        // 0 = derive
  int min_channels = 0, max_channels = 0;  // bounds on a derived count (0 = none)
};

// Throws std::invalid_argument naming the offending field.
Topology resolve_topology(const TopologySpec& spec);

// Per-GPU bandwidth (GB/s) the product assumes for a link it cannot measure: NVLink as NCCL's
// topology search counts it (links x per-link speed: V100 6 x 20, A100 12 x 20, H100 18 x 20.6,
// B200 18 x 40.1), PCIe 24, and one NIC per GPU of the generation's usual speed (100/200/400/400
// Gb/s) whatever the network type. benchmarks/sim/calibration.md compares these with published
// measurements; DYNAMICCL_TOPOLOGY overrides them.
double assumed_bw_GBps(LinkType type, int compcap);

// The topology a group describes from what its ranks can see (their hosts, GPU generation, NVLink
// or PCIe between local GPUs), with assumed bandwidths: what the backend's NCCL prior runs on
// when the user says nothing more, and what the simulator's `"prior": "described"` gives it.
TopologySpec described_topology(int nodes, int gpus_per_node, int compcap, bool pcie);

// Communicator channel count for a group (the same for every algorithm's graph): the topology's
// own, or derived from the links within NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS.
int derive_channels(const Topology& topo, const GroupShape& group);

// The tuning model's inputs for `group`, with link bandwidths and latencies scaled by `scale`.
// The channel count never changes with `scale` (NCCL fixes it at communicator init).
CommInputs derive_comm_inputs(const Topology& topo, const GroupShape& group,
                              const LinkScale& scale = LinkScale());

}  // namespace nccl
}  // namespace dynamiccl
