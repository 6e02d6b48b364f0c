// The NCCL engine's arms: which configurations the learner may pick for NCCL (algorithm x
// protocol x channel cap), named "<algo>/<proto>[/c<N>]" with NCCL's own algorithm and protocol
// names. Torch-free.
#pragma once

#include <array>
#include <vector>

#include "policy/arm_catalog.h"

namespace dynamiccl {

class NcclArmCatalog : public ArmCatalog {
 public:
  NcclArmCatalog();
  const std::vector<Arm>& arms(OpKind op) const override;
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override;

 private:
  std::array<std::vector<Arm>, kNumOps> arms_;
};

}  // namespace dynamiccl
