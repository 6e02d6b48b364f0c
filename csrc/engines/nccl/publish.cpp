#include "engines/nccl/publish.h"

#include "nccl_model/cost_model.h"
#include "nccl_plugin/dynamiccl_nccl.h"

namespace dynamiccl {

void NcclChannel::expect_comm(size_t n_ranks) const {
  if (id_ != 0) dynamiccl_nccl_expect_comm(id_, n_ranks);
}

void NcclChannel::expect_done() const {
  if (id_ != 0) dynamiccl_nccl_expect_comm(id_, static_cast<size_t>(-1));
}

int NcclChannel::comms_bound() const { return dynamiccl_nccl_comms_bound(id_); }

void NcclChannel::publish(OpKind op, uint64_t effective_bytes, const Action& action) const {
  if (action.is_default()) {
    dynamiccl_nccl_clear(id_);
    return;
  }
  // The tuner sees NCCL's ncclFunc_t values.
  dynamiccl_nccl_publish_chunk(
      id_, nccl::func_of(op), static_cast<size_t>(effective_bytes), action.algo, action.proto,
      action.channels, action.chunk_bytes > 0 ? static_cast<size_t>(action.chunk_bytes) : 0);
}

void NcclChannel::publish_nccl_choice(OpKind op, uint64_t effective_bytes) const {
  dynamiccl_nccl_publish(id_, nccl::func_of(op), static_cast<size_t>(effective_bytes), -1, -1, -1);
}

void NcclChannel::clear() const { dynamiccl_nccl_clear(id_); }

bool NcclChannel::delivered() const {
  return dynamiccl_nccl_last_outcome(id_) == DYNAMICCL_NCCL_APPLIED;
}

bool NcclChannel::last_unavailable() const {
  return dynamiccl_nccl_last_outcome(id_) == DYNAMICCL_NCCL_UNAVAILABLE;
}

int NcclChannel::last_channels(OpKind op, uint64_t effective_bytes) const {
  return dynamiccl_nccl_last_channels(id_, nccl::func_of(op), static_cast<size_t>(effective_bytes));
}

int NcclChannel::open_new() { return dynamiccl_nccl_channel_open(); }

void NcclChannel::close(int id) {
  if (id != 0) dynamiccl_nccl_channel_close(id);
}

bool nccl_plugin_loaded() { return dynamiccl_nccl_loaded_by_nccl() != 0; }

}  // namespace dynamiccl
