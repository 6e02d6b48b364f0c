// The NCCL engine's arms for one communicator, from NCCL's own cost model of it (nccl_model/):
// "default" (let NCCL choose), every algorithm/protocol pair the model makes available for each
// collective NCCL's tuner sees, and for Simple and LL128 the same with the channel count capped
// ("ring/LL128/c8"). With NCCL >= 2.30 (tuner ABI v6), ring and tree with Simple or LL128 also
// come with a smaller chunk size: the protocol's default chunk / 2 and / 4 ("ring/Simple/k256K",
// "ring/LL128/k150K"). The prior of an arm is the model's time for it, so probing starts with
// what NCCL believes. The backend builds it for the topology a group describes, the simulator
// for the scenario's: one catalog, so the simulator's figures are the product's. Torch-free.
#pragma once

#include <array>
#include <vector>

#include "nccl_model/cost_model.h"
#include "nccl_model/topology.h"
#include "policy/arm_catalog.h"

namespace dynamiccl {

class NcclArmCatalog : public ArmCatalog {
 public:
  // `caps`: channel caps to offer with Simple and LL128 (values >= the graph's channel count are
  // skipped); no caps and `derive_caps`: a quarter and a half of the channel count.
  // `nccl_version`: the engine's NCCL (NCCL_VERSION_CODE, e.g. 23000 for 2.30.0; 0 = unknown):
  // chunk arms only from DYNAMICCL_NCCL_CHUNK_MIN_VERSION on.
  explicit NcclArmCatalog(nccl::NcclCostModel model, std::vector<int> caps = {},
                          bool derive_caps = true, int nccl_version = 0);

  const std::vector<Arm>& arms(OpKind op) const override;
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override;
  // Channels the arm's call uses over those of NCCL's own choice (the model's per-call shrink
  // included): a channel cap holds fewer SMs.
  double footprint(OpKind op, uint16_t arm, uint64_t effective_bytes) const override;
  int default_channels(OpKind op, uint64_t effective_bytes) const override;

  const nccl::NcclCostModel& model() const { return model_; }
  const std::vector<int>& caps() const { return caps_; }
  bool chunks_offered() const { return chunks_offered_; }

 private:
  nccl::NcclCostModel model_;
  std::vector<int> caps_;
  bool chunks_offered_ = false;
  std::array<std::vector<Arm>, kNumOps> arms_;
};

// "ring/LL128", "ring/LL128/c8" with a channel cap, "ring/Simple/k256K" with a chunk size (in
// KiB), "ring/Simple/c8/k256K" with both.
std::string nccl_arm_name(int algo, int proto, int cap, int chunk_bytes = -1);
// Its inverse: true and the arm's action for a well-formed name (a cap in
// 1..DYNAMICCL_NCCL_MAX_CHANNELS, a chunk the plugin accepts for the protocol:
// dynamiccl_nccl_chunk_valid); whether a group offers the arm is its catalog's answer.
bool parse_nccl_arm_name(const std::string& name, Action* action);

// The catalog of a communicator of `shape` on `topology` (what the backend and the simulator
// both build).
NcclArmCatalog nccl_catalog_for(const nccl::Topology& topology, const nccl::GroupShape& shape,
                                std::vector<int> caps = {}, bool derive_caps = true,
                                int nccl_version = 0);

}  // namespace dynamiccl
