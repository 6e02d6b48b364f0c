// The CPU engine's arms: for each collective, the engine default (native Gloo) plus the
// project's own schedules (csrc/backend/cpu_algorithms.h) that apply to it, with an alpha-beta
// prior cost used only to order probing. Torch-free, so the learner and tests can use it alone.
//
// Arm names are stable (they appear in DYNAMICCL_FORCE, telemetry and saved policies) and the
// same for every group size:
//   allreduce:      default, ring, ring_s4, rd, hd, tree, tree_s4
//   allgather:      default, ring, ring_s4, rd
//   reduce_scatter: default, ring, ring_s4, rd
//   broadcast:      default, tree, tree_s4, ring_s8
//   reduce:         default, tree, tree_s4, ring_s8
//   any other op:   default
// ring = ring (reduce-scatter + all-gather for all-reduce; a pipelined chain for broadcast and
// reduce), rd = recursive doubling (recursive halving for reduce-scatter), hd = halving-
// doubling, tree = binomial tree; "_sN" = the message pipelined as N segments.
// Action: algo = CpuAlgo value, channels = segment count (1 for unsegmented arms), proto = -1;
// "default" is Action{} (all -1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/arm_catalog.h"

namespace dynamiccl {

// One "op:arm" entry of DYNAMICCL_FORCE, resolved.
struct ForcedArm {
  OpKind op = OpKind::kAllReduce;
  uint16_t arm = kDefaultArm;
};

class CpuArmCatalog : public ArmCatalog {
 public:
  explicit CpuArmCatalog(int group_size);

  const std::vector<Arm>& arms(OpKind op) const override;
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override;

  int group_size() const { return group_size_; }
  // Index of the arm called `name` for `op`, or -1.
  int find(OpKind op, const std::string& name) const;
  // "default, ring, ..." for messages.
  std::string arm_names(OpKind op) const;
  // Resolves one "op:arm" entry (e.g. "allreduce:ring_s4"). On failure returns false and sets
  // *error to a message that names the bad value and lists the valid ones.
  bool lookup(const std::string& entry, ForcedArm* out, std::string* error) const;
  // Resolves a whole DYNAMICCL_FORCE value: entries separated by ';' or ',', blanks around
  // names ignored, empty entries skipped; naming an op twice is an error.
  bool parse_force(const std::string& spec, std::vector<ForcedArm>* out, std::string* error) const;

 private:
  int group_size_;
  std::vector<Arm> arms_[kNumOps];
};

}  // namespace dynamiccl
