// Per-thread decision slot, counters, and the public decision API.
#include "decision_channel.h"

#include <atomic>
#include <cstdint>

#include "dynamiccl_nccl.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

// Constant-initialised POD: no TLS guard or constructor runs on first access, so the first
// getCollInfo on a new NCCL thread costs the same as any other.
thread_local ThreadSlot t_slot = {};

// Relaxed: each counter is an independent statistic; nothing is ordered by them.
std::atomic<uint64_t> g_applied{0};
std::atomic<uint64_t> g_abstained{0};
std::atomic<uint64_t> g_unavailable{0};
std::atomic<uint64_t> g_mismatched{0};
std::atomic<uint64_t> g_init_calls{0};
std::atomic<int64_t> g_active_comms{0};
std::atomic<uint64_t> g_abi_version{0};
std::atomic<uint64_t> g_chunk_size_calls{0};
std::atomic<uint64_t> g_chunk_size_applied{0};
std::atomic<uint64_t> g_chunk_size_rejected{0};

void bump(std::atomic<uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

ThreadSlot& this_thread_slot() { return t_slot; }

Verdict match_call(const ThreadSlot& slot, const CollCall& call) {
  if (!slot.armed) return Verdict::kNoDecision;
  if (call.num_pipe_ops > 1) return Verdict::kMismatch;
  if (slot.decision.coll_type != call.coll_type || slot.decision.nbytes != call.nbytes) {
    return Verdict::kMismatch;
  }
  return Verdict::kMatch;
}

void finish_without_decision(ThreadSlot& slot) {
  slot.outcome = DYNAMICCL_NCCL_ABSTAINED;
  bump(g_abstained);
}

void finish_mismatch(ThreadSlot& slot) {
  slot.outcome = DYNAMICCL_NCCL_MISMATCHED;
  bump(g_mismatched);
}

void finish_match(ThreadSlot& slot, int outcome, bool consume) {
  if (outcome == DYNAMICCL_NCCL_APPLIED && slot.decision.chunk_bytes > 0) slot.chunk_due = true;
  if (!slot.answered) {
    slot.answered = true;
    slot.outcome = outcome;
    bump(outcome == DYNAMICCL_NCCL_APPLIED ? g_applied : g_unavailable);
  }
  if (consume) slot.armed = false;
}

void note_comm_init(int abi_version, bool has_context) {
  bump(g_init_calls);
  g_abi_version.store(static_cast<uint64_t>(abi_version), std::memory_order_relaxed);
  if (has_context) g_active_comms.fetch_add(1, std::memory_order_relaxed);
}

void note_comm_destroy() { g_active_comms.fetch_sub(1, std::memory_order_relaxed); }

void note_chunk_size_call() { bump(g_chunk_size_calls); }

bool chunk_valid(int proto, size_t chunk_bytes) {
  return dynamiccl_nccl_chunk_valid(proto, chunk_bytes) != 0;
}

size_t chunk_for_call(ThreadSlot& slot, const ChunkCall& call, size_t nccl_value) {
  const Decision& d = slot.decision;
  if (!slot.chunk_due || d.chunk_bytes == 0) return nccl_value;
  if (d.coll_type != call.coll_type || d.nbytes != call.nbytes) return nccl_value;
  if ((d.algo >= 0 && d.algo != call.algo) || (d.proto >= 0 && d.proto != call.proto)) {
    return nccl_value;
  }
  if (!chunk_valid(call.proto, d.chunk_bytes)) {
    if (!slot.chunk_counted) bump(g_chunk_size_rejected);
    slot.chunk_counted = true;
    return nccl_value;
  }
  // NCCL may ask once per channel range of the collective: each gets the same chunk, counted
  // once per published decision.
  if (!slot.chunk_counted) bump(g_chunk_size_applied);
  slot.chunk_counted = true;
  return d.chunk_bytes;
}

void note_settled_channels(ThreadSlot& slot, const ChunkCall& call, int n_channels) {
  if (n_channels <= 0) return;
  if (slot.settled_channels > 0 &&
      (slot.settled_coll_type != call.coll_type || slot.settled_nbytes != call.nbytes)) {
    slot.settled_channels = 0;  // another collective since: its report replaces the first's
  }
  slot.settled_coll_type = call.coll_type;
  slot.settled_nbytes = call.nbytes;
  if (n_channels > slot.settled_channels) slot.settled_channels = n_channels;
}

}  // namespace nccl_plugin
}  // namespace dynamiccl

using dynamiccl::nccl_plugin::t_slot;

extern "C" {

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_publish_chunk(int coll_type, size_t nbytes, int algo,
                                                        int proto, int nchannels,
                                                        size_t chunk_bytes) {
  t_slot.decision = {coll_type,
                     nbytes,
                     algo < 0 ? -1 : algo,
                     proto < 0 ? -1 : proto,
                     nchannels <= 0 ? -1 : nchannels,
                     chunk_bytes};
  t_slot.armed = true;
  t_slot.answered = false;
  t_slot.outcome = DYNAMICCL_NCCL_NOT_CALLED;
  t_slot.chunk_due = false;
  t_slot.chunk_counted = false;
  t_slot.settled_channels = 0;
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_publish(int coll_type, size_t nbytes, int algo, int proto,
                                                  int nchannels) {
  dynamiccl_nccl_publish_chunk(coll_type, nbytes, algo, proto, nchannels, 0);
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_clear(void) {
  t_slot.armed = false;
  t_slot.chunk_due = false;
  t_slot.settled_channels = 0;
}

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_last_outcome(void) { return t_slot.outcome; }

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_last_channels(int coll_type, size_t nbytes) {
  if (t_slot.settled_coll_type != coll_type || t_slot.settled_nbytes != nbytes) return 0;
  return t_slot.settled_channels;
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_get_counters(struct dynamiccl_nccl_counters* out) {
  using namespace dynamiccl::nccl_plugin;
  if (out == nullptr) return;
  const auto relaxed = std::memory_order_relaxed;
  out->applied = g_applied.load(relaxed);
  out->abstained = g_abstained.load(relaxed);
  out->unavailable = g_unavailable.load(relaxed);
  out->mismatched = g_mismatched.load(relaxed);
  out->init_calls = g_init_calls.load(relaxed);
  const int64_t active = g_active_comms.load(relaxed);
  out->active_comms = active > 0 ? static_cast<uint64_t>(active) : 0;
  out->abi_version = g_abi_version.load(relaxed);
  out->chunk_size_calls = g_chunk_size_calls.load(relaxed);
  out->chunk_size_applied = g_chunk_size_applied.load(relaxed);
  out->chunk_size_rejected = g_chunk_size_rejected.load(relaxed);
}

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_loaded_by_nccl(void) {
  return dynamiccl::nccl_plugin::g_init_calls.load(std::memory_order_relaxed) > 0 ? 1 : 0;
}

}  // extern "C"
