// The decision channels between the DynamICCL backend and NCCL's getCollInfo, and the
// process-wide counters.
//
// A channel belongs to one backend group. The group publishes the decision for its next NCCL
// call there; a communicator is bound to the channel when NCCL initialises the tuner for it
// (dynamiccl_nccl_expect_comm), and its getCollInfo reads the channel on whatever thread NCCL
// runs it: the caller's for a blocking communicator, NCCL's own for a non-blocking one. Either
// way the engine's call returns only after NCCL prepared it, so the outcome is there when the
// group reads it. Publishing and reading are lock-free and allocation-free.
#ifndef DYNAMICCL_NCCL_DECISION_CHANNEL_H_
#define DYNAMICCL_NCCL_DECISION_CHANNEL_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

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

// One group's channel. The publisher writes `decision` and then sets `armed` (release); NCCL's
// thread reads `armed` (acquire) before `decision`, and sets `outcome` (release) last.
struct Channel {
  std::atomic<uint32_t> id{0};     // the open channel's id (index and generation); 0 = closed
  std::atomic<bool> armed{false};  // a decision is published and not consumed
  Decision decision{};
  bool answered = false;  // a matching call already counted it (NCCL 2.21 asks twice per call)
  std::atomic<int> outcome{0};  // enum dynamiccl_nccl_outcome
  bool chunk_due = false;       // getCollInfo applied a decision with a chunk: getChunkSize may
  bool chunk_counted = false;   // one chunk_size_applied per published decision
  // What v6 getChunkSize said NCCL settled on for the channel's last collective since the last
  // publish or clear: its type and bytes, and the most channels of any of its pieces (0: none).
  std::atomic<int> settled_coll_type{-1};
  std::atomic<size_t> settled_nbytes{0};
  std::atomic<int> settled_channels{0};
  std::atomic<int> comms_bound{0};  // communicators bound to the channel since it was opened
};

// The open channel `id`, or null (0, closed, or reused since by another group).
Channel* find_channel(uint32_t id);

// The channel a communicator of `n_ranks` being initialised now binds to (0: none): the
// expectation the initialising thread set, else the only one pending for that size.
uint32_t bind_new_comm(size_t n_ranks);

// One getCollInfo call, as NCCL describes it.
struct CollCall {
  int coll_type;
  size_t nbytes;
  int num_pipe_ops;  // collectives of the group this call stands for
};

enum class Verdict { kNoDecision, kMismatch, kMatch };

// Whether `call` is the one the channel's decision was published for. A call that stands for
// several merged tasks (numPipeOps > 1) is never a match.
Verdict match_call(const Channel& ch, const CollCall& call);

// Book-keeping after a getCollInfo call: outcome, counters, consumption. `ch` may be null (an
// unbound communicator).
void finish_without_decision(Channel* ch);
void finish_mismatch(Channel& ch);
// `outcome` is APPLIED or UNAVAILABLE; `consume` disarms the decision (one per collective).
void finish_match(Channel& ch, int outcome, bool consume);

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
// The chunk size for `call`: the channel's published chunk when getCollInfo applied that
// decision, the call is the decision's (type, bytes, and its algorithm/protocol where named) and
// the chunk is valid for the protocol; otherwise `nccl_value`. Counts what it did.
size_t chunk_for_call(Channel& ch, const ChunkCall& call, size_t nccl_value);
// Records the channels NCCL settled on for `call` (one of its channel-range pieces).
void note_settled_channels(Channel& ch, const ChunkCall& call, int n_channels);

}  // namespace nccl_plugin
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_DECISION_CHANNEL_H_
