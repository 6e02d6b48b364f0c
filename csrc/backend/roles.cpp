#include "backend/roles.h"

#include <utility>

namespace dynamiccl {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Megatron-LM group descriptions (megatron/core/parallel_state.py). Order matters: the first
// prefix that matches wins, so the longer, more specific names come first.
const std::pair<const char*, Role> kMegatronPrefixes[] = {
    {"EXPERT_TENSOR_AND_MODEL_PARALLEL", Role::kExpertParallel},
    {"EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL", Role::kExpertParallel},
    {"EXPERT_TENSOR_PARALLEL", Role::kTensorParallel},
    {"EXPERT_DATA_PARALLEL", Role::kDataParallel},
    {"EXPERT_MODEL_PARALLEL", Role::kExpertParallel},
    {"TENSOR_AND_CONTEXT_PARALLEL", Role::kTensorParallel},
    {"TENSOR_AND_DATA_PARALLEL", Role::kDataParallel},
    {"TENSOR_MODEL_PARALLEL", Role::kTensorParallel},
    {"PIPELINE_MODEL_PARALLEL", Role::kPipeline},
    {"DATA_PARALLEL", Role::kDataParallel},
    {"INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE", Role::kDataParallel},
    {"HYBRID_DP_CP", Role::kDataParallel},
    {"CONTEXT_PARALLEL", Role::kContextParallel},
    // Tied-embedding gradient all-reduce between first and last stage: bulk gradient traffic.
    {"EMBEDDING", Role::kDataParallel},
    {"POSITION_EMBEDDING", Role::kDataParallel},
};

// DeviceMesh dimension names (group_desc "mesh_<dim>"), common spellings.
const std::pair<const char*, Role> kMeshDims[] = {
    {"tp", Role::kTensorParallel},     {"tensor", Role::kTensorParallel},
    {"pp", Role::kPipeline},           {"pipeline", Role::kPipeline},
    {"dp", Role::kDataParallel},       {"dp_replicate", Role::kDataParallel},
    {"dp_shard", Role::kDataParallel}, {"fsdp", Role::kDataParallel},
    {"ddp", Role::kDataParallel},      {"data", Role::kDataParallel},
    {"cp", Role::kContextParallel},    {"context", Role::kContextParallel},
    {"ep", Role::kExpertParallel},     {"expert", Role::kExpertParallel},
};

}  // namespace

Role group_role_from_desc(const std::string& desc, const std::map<std::string, Role>& user_map) {
  if (auto it = user_map.find(desc); it != user_map.end()) return it->second;
  if (starts_with(desc, "mesh_")) {
    const std::string dim = desc.substr(5);
    for (const auto& [name, role] : kMeshDims) {
      if (dim == name) return role;
    }
    return Role::kDefault;
  }
  for (const auto& [prefix, role] : kMegatronPrefixes) {
    if (starts_with(desc, prefix)) return role;
  }
  return Role::kDefault;  // "default_pg", "undefined", user names without a mapping
}

}  // namespace dynamiccl
