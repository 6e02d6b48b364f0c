#include "engines/nccl/publish.h"

#include "nccl_model/cost_model.h"
#include "nccl_plugin/dynamiccl_nccl.h"

namespace dynamiccl {

void nccl_publish(OpKind op, uint64_t effective_bytes, const Action& action) {
  if (action.is_default()) {
    dynamiccl_nccl_clear();
    return;
  }
  // The tuner sees NCCL's ncclFunc_t values.
  dynamiccl_nccl_publish_chunk(
      nccl::func_of(op), static_cast<size_t>(effective_bytes), action.algo, action.proto,
      action.channels, action.chunk_bytes > 0 ? static_cast<size_t>(action.chunk_bytes) : 0);
}

void nccl_clear() { dynamiccl_nccl_clear(); }

bool nccl_plugin_loaded() { return dynamiccl_nccl_loaded_by_nccl() != 0; }

bool nccl_last_outcome_unavailable() {
  return dynamiccl_nccl_last_outcome() == DYNAMICCL_NCCL_UNAVAILABLE;
}

int nccl_last_channels(OpKind op, uint64_t effective_bytes) {
  return dynamiccl_nccl_last_channels(nccl::func_of(op), static_cast<size_t>(effective_bytes));
}

}  // namespace dynamiccl
