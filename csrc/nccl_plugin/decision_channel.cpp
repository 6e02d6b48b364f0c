// Decision channels, their binding to communicators, counters, and the public decision API.
#include "decision_channel.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "dynamiccl_nccl.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

// Channels are numbered 1..kMaxChannels-1 (a group's lifetime each); an id carries the index in
// its low bits and the index's generation above, so a communicator that outlives its group never
// reads the channel of the group that reuses the index.
constexpr uint32_t kIndexBits = 12;
constexpr uint32_t kMaxChannels = 1u << kIndexBits;
Channel g_channels[kMaxChannels];
uint32_t g_generation[kMaxChannels];  // under g_open_mu
std::mutex g_open_mu;

// Expectations: a group about to have its communicator created (dynamiccl_nccl_expect_comm).
struct Expectation {
  uint32_t channel;
  size_t n_ranks;  // 0: any
  std::thread::id thread;
};
std::mutex g_expect_mu;
std::vector<Expectation>& expectations() {
  static std::vector<Expectation> pending;
  return pending;
}

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
std::atomic<uint64_t> g_unbound_comms{0};

void bump(std::atomic<uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

Channel* find_channel(uint32_t id) {
  const uint32_t index = id & (kMaxChannels - 1);
  if (index == 0) return nullptr;
  Channel& ch = g_channels[index];
  return ch.id.load(std::memory_order_acquire) == id ? &ch : nullptr;
}

uint32_t bind_new_comm(size_t n_ranks) {
  std::lock_guard<std::mutex> lock(g_expect_mu);
  uint32_t chosen = 0;
  int candidates = 0;
  for (const Expectation& e : expectations()) {
    if (e.n_ranks != 0 && e.n_ranks != n_ranks) continue;
    if (e.thread == std::this_thread::get_id()) {
      chosen = e.channel;
      candidates = 1;
      break;
    }
    chosen = e.channel;
    ++candidates;
  }
  Channel* ch = candidates == 1 ? find_channel(chosen) : nullptr;
  if (ch == nullptr) {
    bump(g_unbound_comms);
    return 0;
  }
  ch->comms_bound.fetch_add(1, std::memory_order_relaxed);
  return chosen;
}

Verdict match_call(const Channel& ch, const CollCall& call) {
  if (!ch.armed.load(std::memory_order_acquire)) return Verdict::kNoDecision;
  if (call.num_pipe_ops > 1) return Verdict::kMismatch;
  if (ch.decision.coll_type != call.coll_type || ch.decision.nbytes != call.nbytes) {
    return Verdict::kMismatch;
  }
  return Verdict::kMatch;
}

void finish_without_decision(Channel* ch) {
  if (ch != nullptr) ch->outcome.store(DYNAMICCL_NCCL_ABSTAINED, std::memory_order_release);
  bump(g_abstained);
}

void finish_mismatch(Channel& ch) {
  ch.outcome.store(DYNAMICCL_NCCL_MISMATCHED, std::memory_order_release);
  bump(g_mismatched);
}

void finish_match(Channel& ch, int outcome, bool consume) {
  if (outcome == DYNAMICCL_NCCL_APPLIED && ch.decision.chunk_bytes > 0) ch.chunk_due = true;
  if (consume) ch.armed.store(false, std::memory_order_relaxed);
  if (!ch.answered) {
    ch.answered = true;
    bump(outcome == DYNAMICCL_NCCL_APPLIED ? g_applied : g_unavailable);
    ch.outcome.store(outcome, std::memory_order_release);
  }
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

size_t chunk_for_call(Channel& ch, const ChunkCall& call, size_t nccl_value) {
  const Decision& d = ch.decision;
  if (!ch.chunk_due || d.chunk_bytes == 0) return nccl_value;
  if (d.coll_type != call.coll_type || d.nbytes != call.nbytes) return nccl_value;
  if ((d.algo >= 0 && d.algo != call.algo) || (d.proto >= 0 && d.proto != call.proto)) {
    return nccl_value;
  }
  if (!chunk_valid(call.proto, d.chunk_bytes)) {
    if (!ch.chunk_counted) bump(g_chunk_size_rejected);
    ch.chunk_counted = true;
    return nccl_value;
  }
  // NCCL may ask once per channel range of the collective: each gets the same chunk, counted
  // once per published decision.
  if (!ch.chunk_counted) bump(g_chunk_size_applied);
  ch.chunk_counted = true;
  return d.chunk_bytes;
}

void note_settled_channels(Channel& ch, const ChunkCall& call, int n_channels) {
  if (n_channels <= 0) return;
  const auto relaxed = std::memory_order_relaxed;
  int most = ch.settled_channels.load(relaxed);
  if (most > 0 && (ch.settled_coll_type.load(relaxed) != call.coll_type ||
                   ch.settled_nbytes.load(relaxed) != call.nbytes)) {
    most = 0;  // another collective since: its report replaces the first's
  }
  ch.settled_coll_type.store(call.coll_type, relaxed);
  ch.settled_nbytes.store(call.nbytes, relaxed);
  ch.settled_channels.store(n_channels > most ? n_channels : most, std::memory_order_release);
}

}  // namespace nccl_plugin
}  // namespace dynamiccl

namespace np = dynamiccl::nccl_plugin;

extern "C" {

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_channel_open(void) {
  std::lock_guard<std::mutex> lock(np::g_open_mu);
  for (uint32_t index = 1; index < np::kMaxChannels; ++index) {
    np::Channel& ch = np::g_channels[index];
    if (ch.id.load(std::memory_order_relaxed) != 0) continue;
    const uint32_t generation = ++np::g_generation[index] & ((1u << (31 - np::kIndexBits)) - 1);
    const uint32_t id = (generation == 0 ? 1 : generation) << np::kIndexBits | index;
    ch.armed.store(false, std::memory_order_relaxed);
    ch.outcome.store(DYNAMICCL_NCCL_NOT_CALLED, std::memory_order_relaxed);
    ch.settled_channels.store(0, std::memory_order_relaxed);
    ch.comms_bound.store(0, std::memory_order_relaxed);
    ch.id.store(id, std::memory_order_release);
    return static_cast<int>(id);
  }
  return 0;
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_channel_close(int channel) {
  dynamiccl_nccl_expect_comm(channel, static_cast<size_t>(-1));
  std::lock_guard<std::mutex> lock(np::g_open_mu);
  if (np::Channel* ch = np::find_channel(static_cast<uint32_t>(channel))) {
    ch->armed.store(false, std::memory_order_relaxed);
    ch->id.store(0, std::memory_order_release);
  }
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_expect_comm(int channel, size_t n_ranks) {
  std::lock_guard<std::mutex> lock(np::g_expect_mu);
  auto& pending = np::expectations();
  for (auto it = pending.begin(); it != pending.end(); ++it) {
    if (it->channel == static_cast<uint32_t>(channel)) {
      pending.erase(it);
      break;
    }
  }
  if (n_ranks == static_cast<size_t>(-1) ||
      np::find_channel(static_cast<uint32_t>(channel)) == nullptr) {
    return;
  }
  pending.push_back({static_cast<uint32_t>(channel), n_ranks, std::this_thread::get_id()});
}

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_comms_bound(int channel) {
  np::Channel* ch = np::find_channel(static_cast<uint32_t>(channel));
  return ch ? ch->comms_bound.load(std::memory_order_relaxed) : 0;
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_publish_chunk(int channel, int coll_type, size_t nbytes,
                                                        int algo, int proto, int nchannels,
                                                        size_t chunk_bytes) {
  np::Channel* ch = np::find_channel(static_cast<uint32_t>(channel));
  if (ch == nullptr) return;
  ch->decision = {coll_type,
                  nbytes,
                  algo < 0 ? -1 : algo,
                  proto < 0 ? -1 : proto,
                  nchannels <= 0 ? -1 : nchannels,
                  chunk_bytes};
  ch->answered = false;
  ch->chunk_due = false;
  ch->chunk_counted = false;
  ch->settled_channels.store(0, std::memory_order_relaxed);
  ch->outcome.store(DYNAMICCL_NCCL_NOT_CALLED, std::memory_order_relaxed);
  ch->armed.store(true, std::memory_order_release);
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_publish(int channel, int coll_type, size_t nbytes,
                                                  int algo, int proto, int nchannels) {
  dynamiccl_nccl_publish_chunk(channel, coll_type, nbytes, algo, proto, nchannels, 0);
}

DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_clear(int channel) {
  np::Channel* ch = np::find_channel(static_cast<uint32_t>(channel));
  if (ch == nullptr) return;
  ch->armed.store(false, std::memory_order_relaxed);
  ch->chunk_due = false;
  ch->settled_channels.store(0, std::memory_order_relaxed);
}

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_last_outcome(int channel) {
  np::Channel* ch = np::find_channel(static_cast<uint32_t>(channel));
  return ch ? ch->outcome.load(std::memory_order_acquire) : DYNAMICCL_NCCL_NOT_CALLED;
}

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_last_channels(int channel, int coll_type, size_t nbytes) {
  np::Channel* ch = np::find_channel(static_cast<uint32_t>(channel));
  if (ch == nullptr) return 0;
  const int n = ch->settled_channels.load(std::memory_order_acquire);
  const auto relaxed = std::memory_order_relaxed;
  if (ch->settled_coll_type.load(relaxed) != coll_type ||
      ch->settled_nbytes.load(relaxed) != nbytes) {
    return 0;
  }
  return n;
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
  out->unbound_comms = g_unbound_comms.load(relaxed);
}

DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_loaded_by_nccl(void) {
  return dynamiccl::nccl_plugin::g_init_calls.load(std::memory_order_relaxed) > 0 ? 1 : 0;
}

}  // extern "C"
