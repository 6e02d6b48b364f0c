// The CPU engine's arms: for each collective, the engine default (Gloo's own algorithm) plus
// every registered schedule that runs it (schedule.h), once per offered segment count, with the
// schedule's alpha-beta prior to order probing.
//
// Arm names are stable (they appear in DYNAMICCL_FORCE, telemetry and saved policies) and the
// same for every group size: "<schedule>" or "<schedule>_s<N>" for N pipelined segments
// (`python -m dynamiccl_pg actions` lists them). Action: algo = index of the schedule in
// cpu_schedules(), channels = segment count, proto = -1; "default" is Action{}.
#pragma once

#include <array>
#include <vector>

#include "policy/arm_catalog.h"

namespace dynamiccl {

class CpuArmCatalog : public ArmCatalog {
 public:
  CpuArmCatalog();

  const std::vector<Arm>& arms(OpKind op) const override;
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override;

 private:
  std::array<std::vector<Arm>, kNumOps> arms_;
};

}  // namespace dynamiccl
