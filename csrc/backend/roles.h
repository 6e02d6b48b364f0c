// Which role a group's traffic plays, from the group description (Megatron's group names,
// DeviceMesh's "mesh_<dim>", "default_pg") and, per call, from the op and the hint in scope.
#pragma once

#include <map>
#include <string>

#include "core/types.h"

namespace dynamiccl {

// Role of a whole group. `user_map` (description -> role) is consulted first, exactly, then the
// built-in rules; anything unknown is Role::kDefault.
Role group_role_from_desc(const std::string& desc, const std::map<std::string, Role>& user_map);

// Role of one call: a hint's role wins; otherwise the group role refined by the op (FSDP2 issues
// flat all-gather / reduce-scatter — the "into tensor" forms — on its data-parallel shard group;
// list forms are bookkeeping such as DDP's parameter check). A bucket hint marks DDP traffic.
inline Role call_role(Role group_role, OpKind op, bool flat, const Hint& hint) {
  if (hint.role >= 0 && hint.role < kNumRoles) return static_cast<Role>(hint.role);
  if (group_role == Role::kDataParallel || group_role == Role::kDefault) {
    if (flat && op == OpKind::kAllGather) return Role::kFsdpAllGather;
    if (flat && op == OpKind::kReduceScatter) return Role::kFsdpReduceScatter;
    if (hint.bucket >= 0) return Role::kDataParallel;
  }
  return group_role;
}

// Exposure of one call (core/types.h), from the framework context alone: the priority hint
// decides when given (0 overlapped, 2 exposed); a synchronous call is exposed; DDP's buckets
// other than the last overlap backward compute; FSDP2's reduce-scatters overlap, and so do its
// all-gathers that annotate() marks as prefetched (every unit's but the first forward one);
// pipeline sends overlap the stage's compute. Everything else is exposed: the yardstick of an
// exposed call is its own duration, as for a call whose context is unknown.
inline Exposure call_exposure(Role role, bool synchronous, const Hint& hint) {
  if (hint.priority == Hint::kPriorityBackground) return Exposure::kOverlapped;
  if (hint.priority == Hint::kPriorityCritical || synchronous) return Exposure::kExposed;
  if (hint.is_last == 0) return Exposure::kOverlapped;
  if (hint.is_last == 1) return Exposure::kExposed;
  switch (role) {
    case Role::kFsdpReduceScatter:
    case Role::kPipeline: return Exposure::kOverlapped;
    case Role::kFsdpAllGather: {
      const bool first_forward = hint.bucket == 0 && hint.direction == Hint::kForward;
      return hint.bucket >= 0 && !first_forward ? Exposure::kOverlapped : Exposure::kExposed;
    }
    default: return Exposure::kExposed;
  }
}

}  // namespace dynamiccl
