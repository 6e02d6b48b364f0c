// The NCCL engine's side of a decision: which configurations the learner may pick for NCCL
// (algorithm x protocol x channel cap), and how a decision reaches NCCL — published on this thread
// for our tuner plugin, which NCCL's getCollInfo consults synchronously on the same thread
// (blocking communicators).
#pragma once

#include <vector>

#include "core/types.h"
#include "policy/arm_catalog.h"

namespace dynamiccl {

class NcclArmCatalog : public ArmCatalog {
 public:
  explicit NcclArmCatalog(int group_size);
  const std::vector<Arm>& arms(OpKind op) const override;
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override;

 private:
  std::vector<std::vector<Arm>> arms_;  // per OpKind
};

// Publishes the action for the NCCL call this thread issues next (default action: clears).
void nccl_publish(OpKind op, uint64_t effective_bytes, const Action& action);
void nccl_clear();
// True when NCCL consulted the plugin for the last call and could not apply the arm.
bool nccl_last_outcome_unavailable();
// True once NCCL in this process initialised the plugin (a communicator exists).
bool nccl_plugin_loaded();

}  // namespace dynamiccl
