// The per-thread decision channel between the DynamICCL backend and NCCL's getCollInfo,
// and the process-wide counters. Everything here is lock-free and allocation-free.
#ifndef DYNAMICCL_NCCL_DECISION_CHANNEL_H_
#define DYNAMICCL_NCCL_DECISION_CHANNEL_H_

#include <stddef.h>

namespace dynamiccl {
namespace nccl_plugin {

struct Decision {
  int coll_type;
  size_t nbytes;
  int algo;            // -1 = NCCL's choice
  int proto;           // -1 = NCCL's choice
  int nchannels;       // <= 0 = NCCL's choice
  size_t chunk_bytes;  // 0 = NCCL's choice (tuner ABI v6 getChunkSize)
};

struct ThreadSlot {
  Decision decision;
  bool armed;          // a decision is published and not consumed
  bool answered;       // a matching call already counted it (NCCL 2.21 asks twice per call)
  int outcome;         // enum dynamiccl_nccl_outcome
  bool chunk_due;      // getCollInfo applied a decision with a chunk; getChunkSize may return it
  bool chunk_counted;  // one chunk_size_applied per published decision
  // What v6 getChunkSize said NCCL settled on for the thread's last collective since the last
  // publish or clear: its type and bytes, and the most channels of any of its pieces (0: none).
  int settled_coll_type;
  size_t settled_nbytes;
  int settled_channels;
};

// The calling thread's slot (thread_local storage of this library).
ThreadSlot& this_thread_slot();

// One getCollInfo call, as NCCL describes it.
struct CollCall {
  int coll_type;
  size_t nbytes;
  int num_pipe_ops;  // collectives of the group this call stands for
};

enum class Verdict { kNoDecision, kMismatch, kMatch };

// Whether `call` is the one the thread's decision was published for. A call that stands
// for several merged tasks (numPipeOps > 1) is never a match.
Verdict match_call(const ThreadSlot& slot, const CollCall& call);

// Book-keeping after a getCollInfo call: outcome, counters, consumption.
void finish_without_decision(ThreadSlot& slot);
void finish_mismatch(ThreadSlot& slot);
// `outcome` is APPLIED or UNAVAILABLE; `consume` disarms the decision (one per collective).
void finish_match(ThreadSlot& slot, int outcome, bool consume);

// Communicator life cycle, reported by the tuner's init and destroy/finalize.
// `has_context`: init could allocate the per-communicator context (only those count as
// active, since only those are destroyed with a context).
void note_comm_init(int abi_version, bool has_context);
void note_comm_destroy();
void note_chunk_size_call();

// One v6 getChunkSize call, as NCCL describes it (after it settled algorithm and protocol).
struct ChunkCall {
  int coll_type;
  size_t nbytes;
  int algo;
  int proto;
};
// Whether the protocol accepts `chunk_bytes` from us (dynamiccl_nccl_chunk_valid).
bool chunk_valid(int proto, size_t chunk_bytes);
// The chunk size for `call`: the thread's published chunk when getCollInfo applied that
// decision, the call is the decision's (type, bytes, and its algorithm/protocol where named) and
// the chunk is valid for the protocol; otherwise `nccl_value`. Counts what it did.
size_t chunk_for_call(ThreadSlot& slot, const ChunkCall& call, size_t nccl_value);
// Records the channels NCCL settled on for `call` (one of its channel-range pieces).
void note_settled_channels(ThreadSlot& slot, const ChunkCall& call, int n_channels);

}  // namespace nccl_plugin
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_DECISION_CHANNEL_H_
