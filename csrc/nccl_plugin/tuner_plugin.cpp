// The tuner plugin NCCL loads: ncclTunerPlugin_v2 ... _v6, one per NCCL generation, all
// backed by the same per-communicator context and the same per-thread decision channel.
//
// getCollInfo never fails: every problem ends in "NCCL decides" plus a counter, because an
// error from getCollInfo fails the user's collective (NCCL propagates it).
#include <cstdint>
#include <cstdlib>

#include "decision_channel.h"
#include "dynamiccl_nccl.h"
#include "forcing.h"
#include "plugin_abi.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

using nccl_abi::LogFn;
using nccl_abi::Result;
using nccl_abi::kSuccess;

constexpr const char* kPluginName = "DynamICCL";

// One per communicator, created by init and freed by destroy/finalize.
struct CommContext {
  uint64_t comm_id;  // NCCL's commHash (v5+), 0 before
  size_t n_ranks;
  size_t n_nodes;
  int abi_version;
  // v2 only: NCCL_ALGO/NCCL_PROTO restrict NCCL's choices in ways v2 cannot see, so v2
  // does not force pairs at all when they are set (v3+ sees them as -1 table entries).
  bool env_restricted;
};

Result create_context(int abi_version, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                      LogFn log, void** context) {
  // Returning an error here would fail the communicator's creation: never do that.
  if (context == nullptr) return kSuccess;
  auto* ctx = static_cast<CommContext*>(std::calloc(1, sizeof(CommContext)));
  *context = ctx;
  note_comm_init(ctx != nullptr);
  if (ctx == nullptr) {
    // A NULL context means "not tuned" for this communicator; NCCL runs as usual.
    if (log != nullptr) {
      log(nccl_abi::kLogInfo, nccl_abi::kLogSubsysInit | nccl_abi::kLogSubsysTuning,
          "dynamiccl_nccl", __LINE__, "%s tuner: out of memory, communicator not tuned",
          kPluginName);
    }
    return kSuccess;
  }
  ctx->comm_id = comm_id;
  ctx->n_ranks = n_ranks;
  ctx->n_nodes = n_nodes;
  ctx->abi_version = abi_version;
  ctx->env_restricted = abi_version == 2 && (std::getenv("NCCL_ALGO") != nullptr ||
                                              std::getenv("NCCL_PROTO") != nullptr);
  if (log != nullptr) {
    log(nccl_abi::kLogInfo, nccl_abi::kLogSubsysInit | nccl_abi::kLogSubsysTuning,
        "dynamiccl_nccl", __LINE__,
        "%s tuner: ABI v%d, comm 0x%llx, %zu ranks on %zu nodes%s", kPluginName, abi_version,
        static_cast<unsigned long long>(comm_id), n_ranks, n_nodes,
        ctx->env_restricted ? " (NCCL_ALGO/NCCL_PROTO set: algorithm/protocol not forced)" : "");
  }
  return kSuccess;
}

Result destroy_context(void* context) {
  if (context != nullptr) {
    std::free(context);
    note_comm_destroy();
  }
  return kSuccess;
}

// Shared first step of every getCollInfo: is there a published decision for this call?
// Returns the slot to act on, or nullptr when the call was already settled.
ThreadSlot* matching_slot(void* context, int coll_type, size_t n_bytes, int num_pipe_ops) {
  ThreadSlot& slot = this_thread_slot();
  if (context == nullptr) {  // communicator left untuned by init
    finish_without_decision(slot);
    return nullptr;
  }
  switch (match_call(slot, coll_type, n_bytes, num_pipe_ops)) {
    case Verdict::kNoDecision:
      finish_without_decision(slot);
      return nullptr;
    case Verdict::kMismatch:
      finish_mismatch(slot);
      return nullptr;
    case Verdict::kMatch:
      break;
  }
  return &slot;
}

// v3+: the decision goes through the cost table. NCCL 2.22+ asks once per collective
// (aggregate), so a match consumes the decision.
Result get_coll_info_table(void* context, int coll_type, size_t n_bytes, int num_pipe_ops,
                           float** cost_table, int num_algo, int num_proto, int /*reg_buff*/,
                           int* n_channels) {
  ThreadSlot* slot = matching_slot(context, coll_type, n_bytes, num_pipe_ops);
  if (slot == nullptr) return kSuccess;
  const Decision& d = slot->decision;
  const int cap = channel_cap(d.nchannels);
  const bool wants_pair = d.algo >= 0 || d.proto >= 0;
  // The table arrives as float** but is one contiguous float[num_algo][num_proto].
  float* table = reinterpret_cast<float*>(cost_table);
  const bool ok = (cap == 0 || n_channels != nullptr) &&
                  (!wants_pair || force_in_cost_table(table, num_algo, num_proto, d.algo, d.proto));
  if (ok && cap > 0) *n_channels = cap;
  finish_match(*slot, ok ? DYNAMICCL_NCCL_APPLIED : DYNAMICCL_NCCL_UNAVAILABLE, true);
  return kSuccess;
}

Result get_coll_info_v3(void* context, int coll_type, size_t n_bytes, int num_pipe_ops,
                        float** cost_table, int num_algo, int num_proto, int* n_channels) {
  return get_coll_info_table(context, coll_type, n_bytes, num_pipe_ops, cost_table, num_algo,
                             num_proto, 0, n_channels);
}

// v2 (NCCL 2.21): direct outputs. NCCL asks about a lone collective twice (the aggregate
// for algorithm/protocol, then the task itself for channels), so the decision answers every
// matching call until the next publish/clear and is counted once.
Result get_coll_info_v2(void* context, int coll_type, size_t n_bytes, int collnet_support,
                        int nvls_support, int num_pipe_ops, int* algorithm, int* protocol,
                        int* n_channels) {
  ThreadSlot* slot = matching_slot(context, coll_type, n_bytes, num_pipe_ops);
  if (slot == nullptr) return kSuccess;
  const auto* ctx = static_cast<const CommContext*>(context);
  const Decision& d = slot->decision;
  const int cap = channel_cap(d.nchannels);
  const bool wants_pair = d.algo >= 0 || d.proto >= 0;
  const V2Facts facts{coll_type, collnet_support, nvls_support, ctx->n_nodes,
                      ctx->env_restricted};
  const bool ok = (cap == 0 || n_channels != nullptr) &&
                  (!wants_pair || (algorithm != nullptr && protocol != nullptr &&
                                   v2_pair_allowed(facts, d.algo, d.proto)));
  if (ok) {
    if (wants_pair) {
      *algorithm = d.algo;
      *protocol = d.proto;
    }
    if (cap > 0) *n_channels = cap;
  }
  finish_match(*slot, ok ? DYNAMICCL_NCCL_APPLIED : DYNAMICCL_NCCL_UNAVAILABLE, false);
  return kSuccess;
}

Result init_v2(size_t n_ranks, size_t n_nodes, LogFn log, void** context) {
  return create_context(2, 0, n_ranks, n_nodes, log, context);
}
Result init_v3(size_t n_ranks, size_t n_nodes, LogFn log, void** context) {
  return create_context(3, 0, n_ranks, n_nodes, log, context);
}
Result init_v4(size_t n_ranks, size_t n_nodes, LogFn log, void** context) {
  return create_context(4, 0, n_ranks, n_nodes, log, context);
}
// NCCL's model constants and NVLink-domain info are left as NCCL computed them.
Result init_v5(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes, LogFn log,
               void* /*nvl_domain_info*/, void* /*constants*/) {
  return create_context(5, comm_id, n_ranks, n_nodes, log, context);
}
Result init_v6(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes, LogFn log,
               void* /*nvl_domain_info*/, void* /*constants*/) {
  return create_context(6, comm_id, n_ranks, n_nodes, log, context);
}

}  // namespace
}  // namespace nccl_plugin
}  // namespace dynamiccl

// NCCL looks these up by name with dlsym, newest ABI first, and never writes to them.
namespace np = dynamiccl::nccl_plugin;
namespace abi = dynamiccl::nccl_abi;

extern "C" DYNAMICCL_NCCL_EXPORT const abi::TunerV2 ncclTunerPlugin_v2 = {
    np::kPluginName, np::init_v2, np::get_coll_info_v2, np::destroy_context};

extern "C" DYNAMICCL_NCCL_EXPORT const abi::TunerV3 ncclTunerPlugin_v3 = {
    np::kPluginName, np::init_v3, np::get_coll_info_v3, np::destroy_context};

extern "C" DYNAMICCL_NCCL_EXPORT const abi::TunerV4 ncclTunerPlugin_v4 = {
    np::kPluginName, np::init_v4, np::get_coll_info_table, np::destroy_context};

extern "C" DYNAMICCL_NCCL_EXPORT const abi::TunerV5 ncclTunerPlugin_v5 = {
    np::kPluginName, np::init_v5, np::get_coll_info_table, np::destroy_context};

// getChunkSize stays NULL: NCCL keeps its own chunk size.
extern "C" DYNAMICCL_NCCL_EXPORT const abi::TunerV6 ncclTunerPlugin_v6 = {
    np::kPluginName, np::init_v6, np::get_coll_info_table, np::destroy_context, nullptr};
