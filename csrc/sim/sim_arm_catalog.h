// The arms the simulated NCCL offers one process group: "default" (let NCCL choose), every
// algorithm/protocol pair NCCL's model makes available for the op on this group, and each of
// those with its channel count capped. Priors are NCCL's own nominal predictions, so probing
// starts with what NCCL believes is best.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "policy/arm_catalog.h"
#include "sim/truth.h"

namespace dynamiccl {
namespace sim {

class SimArmCatalog : public ArmCatalog {
 public:
  // `caps`: channel caps to offer with Simple and LL128 (values >= the group's channel count
  // are skipped); `derive_caps` with no caps = a quarter and a half of the channel count.
  SimArmCatalog(std::shared_ptr<const GroupWorld> world, std::vector<int> caps,
                bool derive_caps = true);

  const std::vector<Arm>& arms(OpKind op) const override;
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override;

  const GroupWorld& world() const { return *world_; }
  const std::vector<int>& caps() const { return caps_; }

 private:
  std::shared_ptr<const GroupWorld> world_;
  std::vector<int> caps_;
  std::array<std::vector<Arm>, kNumOps> arms_;
};

// "ring/LL128", or "ring/LL128/c8" with a channel cap.
std::string arm_name(int algo, int proto, int cap);

}  // namespace sim
}  // namespace dynamiccl
