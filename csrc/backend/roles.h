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

}  // namespace dynamiccl
