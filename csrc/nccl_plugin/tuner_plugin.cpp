// The tuner plugin NCCL loads: ncclTunerPlugin_v2 ... _v7, one per NCCL generation, all
// backed by the same per-communicator context, bound at init to a group's decision channel
// (decision_channel.h).
//
// getCollInfo never fails: every problem ends in "NCCL decides" plus a counter, because an
// error from getCollInfo fails the user's collective (NCCL propagates it).
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>

#include "abi/tuner_v2.h"
#include "abi/tuner_v3.h"
#include "abi/tuner_v4.h"
#include "abi/tuner_v5.h"
#include "abi/tuner_v6.h"
#include "abi/tuner_v7.h"
#include "decision_channel.h"
#include "dynamiccl_nccl.h"
#include "forcing.h"
#include "tuning_log.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

constexpr const char* kPluginName = "DynamICCL";

// One per communicator, created by init and freed by destroy/finalize.
struct CommContext {
  TuningLog log;
  uint32_t channel;  // the group's decision channel (0: bound to none, never tuned)
  size_t n_nodes;
  // v2 only: NCCL_ALGO/NCCL_PROTO restrict NCCL's choices in ways v2 cannot see, so v2
  // does not force pairs at all when they are set (v3+ sees them as -1 table entries).
  bool env_restricted;
};
static_assert(std::is_trivially_destructible<CommContext>::value, "finalize only frees it");

ncclResult_t create_context(int abi_version, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                            ncclDebugLogger_t logger, void** context) {
  // Returning an error here would fail the communicator's creation: never do that.
  if (context == nullptr) return ncclSuccess;
  void* memory = std::malloc(sizeof(CommContext));
  note_comm_init(abi_version, memory != nullptr);
  if (memory == nullptr) {
    // A NULL context means "not tuned" for this communicator; NCCL runs as usual.
    *context = nullptr;
    if (logger != nullptr) {
      logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __func__, __LINE__,
             "%s tuner: out of memory, communicator not tuned", kPluginName);
    }
    return ncclSuccess;
  }
  auto* ctx = new (memory) CommContext{};
  *context = ctx;
  ctx->log.logger = logger;
  ctx->log.comm_id = comm_id;
  ctx->channel = bind_new_comm(n_ranks);
  ctx->n_nodes = n_nodes;
  ctx->env_restricted = abi_version == 2 && (std::getenv("NCCL_ALGO") != nullptr ||
                                             std::getenv("NCCL_PROTO") != nullptr);
  if (logger != nullptr) {
    logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __func__, __LINE__,
           "%s tuner: ABI v%d, comm 0x%llx, %zu ranks on %zu nodes, %s%s", kPluginName, abi_version,
           static_cast<unsigned long long>(comm_id), n_ranks, n_nodes,
           ctx->channel ? "bound to a DynamICCL group" : "no DynamICCL group: not tuned",
           ctx->env_restricted ? " (NCCL_ALGO/NCCL_PROTO set: algorithm/protocol not forced)" : "");
  }
  return ncclSuccess;
}

// Runs one getCollInfo. A call that the channel's published decision is for goes to
// `express(decision)`, which writes the decision into NCCL's outputs and returns true, or
// returns false having written nothing when NCCL cannot take it; any other call leaves
// NCCL to decide. The outcome is recorded on the channel and in NCCL's log. `consume`: one
// decision per collective (see finish_match).
template <class Express>
void decide(CommContext* ctx, const CollCall& call, bool consume, Express express) {
  Channel* ch = ctx ? find_channel(ctx->channel) : nullptr;
  if (ch == nullptr) {  // communicator left untuned by init, or its group is gone
    finish_without_decision(nullptr);
    if (ctx) log_call(ctx->log, call, DYNAMICCL_NCCL_ABSTAINED, nullptr);
    return;
  }
  switch (match_call(*ch, call)) {
    case Verdict::kNoDecision:
      finish_without_decision(ch);
      log_call(ctx->log, call, DYNAMICCL_NCCL_ABSTAINED, nullptr);
      return;
    case Verdict::kMismatch:
      finish_mismatch(*ch);
      log_call(ctx->log, call, DYNAMICCL_NCCL_MISMATCHED, &ch->decision);
      return;
    case Verdict::kMatch: {
      const bool honoured = express(ch->decision);
      const int outcome = honoured ? DYNAMICCL_NCCL_APPLIED : DYNAMICCL_NCCL_UNAVAILABLE;
      finish_match(*ch, outcome, consume);
      log_call(ctx->log, call, outcome, &ch->decision);
      return;
    }
  }
}

// ---- entry points, named after the ncclTuner_vN_t members they implement --------------

ncclResult_t initV2(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  return create_context(2, 0, nRanks, nNodes, logFunction, context);
}
ncclResult_t initV3(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  return create_context(3, 0, nRanks, nNodes, logFunction, context);
}
ncclResult_t initV4(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  return create_context(4, 0, nRanks, nNodes, logFunction, context);
}
// NCCL's model constants and NVLink-domain info are left as NCCL computed them.
ncclResult_t initV5(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                    ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* /*nvlDomainInfo*/,
                    ncclTunerConstants_v5_t* /*constants*/) {
  return create_context(5, commId, nRanks, nNodes, logFunction, context);
}
ncclResult_t initV6(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                    ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* /*nvlDomainInfo*/,
                    ncclTunerConstants_v6_t* /*constants*/) {
  return create_context(6, commId, nRanks, nNodes, logFunction, context);
}
ncclResult_t initV7(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                    ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v7_t* /*nvlDomainInfo*/,
                    ncclTunerConstants_v7_t* /*constants*/) {
  return create_context(7, commId, nRanks, nNodes, logFunction, context);
}

// v2 (NCCL 2.21): direct outputs. NCCL asks about a lone collective twice (the aggregate
// for algorithm/protocol, then the task itself for channels), so the decision answers every
// matching call until the next publish/clear and is counted once.
ncclResult_t getCollInfoV2(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                           int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                           int* nChannels) {
  auto* ctx = static_cast<CommContext*>(context);
  decide(ctx, {collType, nBytes, numPipeOps}, /*consume=*/false, [&](const Decision& d) {
    const int cap = channel_cap(d.nchannels);
    const bool wants_pair = d.algo >= 0 || d.proto >= 0;
    if (cap > 0 && nChannels == nullptr) return false;
    if (wants_pair) {
      const V2Facts facts{collType, collNetSupport, nvlsSupport, ctx->n_nodes, ctx->env_restricted};
      if (algorithm == nullptr || protocol == nullptr || !v2_pair_allowed(facts, d.algo, d.proto)) {
        return false;
      }
      *algorithm = d.algo;
      *protocol = d.proto;
    }
    if (cap > 0) *nChannels = cap;
    return true;
  });
  return ncclSuccess;
}

// v4..v7; v3 forwards here. The decision goes through the cost table. NCCL 2.22+ asks once
// per collective (aggregate), so a match consumes the decision.
ncclResult_t getCollInfo(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                         float** collCostTable, int numAlgo, int numProto, int /*regBuff*/,
                         int* nChannels) {
  auto* ctx = static_cast<CommContext*>(context);
  decide(ctx, {collType, nBytes, numPipeOps}, /*consume=*/true, [&](const Decision& d) {
    const int cap = channel_cap(d.nchannels);
    const bool wants_pair = d.algo >= 0 || d.proto >= 0;
    if (cap > 0 && nChannels == nullptr) return false;
    // The table arrives as float** but is one contiguous float[numAlgo][numProto].
    float* table = reinterpret_cast<float*>(collCostTable);
    if (wants_pair && !force_in_cost_table(table, numAlgo, numProto, d.algo, d.proto)) {
      return false;
    }
    if (cap > 0) *nChannels = cap;
    return true;
  });
  return ncclSuccess;
}

ncclResult_t getCollInfoV3(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                           float** collCostTable, int numAlgo, int numProto, int* nChannels) {
  return getCollInfo(context, collType, nBytes, numPipeOps, collCostTable, numAlgo, numProto, 0,
                     nChannels);
}

// v6, v7 (NCCL 2.30+): asked after NCCL settled algorithm, protocol and channels. Notes the
// channels (dynamiccl_nccl_last_channels) and returns the published chunk for the collective whose
// decision getCollInfo applied on the channel (chunk_for_call has the rules); otherwise, or for an
// untuned communicator, NCCL's value stays. Never fails.
ncclResult_t getChunkSize(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto,
                          int nChannels, size_t* chunkSize) {
  note_chunk_size_call();
  if (context == nullptr || chunkSize == nullptr) return ncclSuccess;
  Channel* ch = find_channel(static_cast<CommContext*>(context)->channel);
  if (ch == nullptr) return ncclSuccess;
  const ChunkCall call{collType, nBytes, algo, proto};
  note_settled_channels(*ch, call, nChannels);
  *chunkSize = chunk_for_call(*ch, call, *chunkSize);
  return ncclSuccess;
}

// destroy (v2..v4) and finalize (v5..v7).
ncclResult_t finalize(void* context) {
  if (context != nullptr) {
    std::free(context);
    note_comm_destroy();
  }
  return ncclSuccess;
}

}  // namespace
}  // namespace nccl_plugin
}  // namespace dynamiccl

// NCCL looks these up by name with dlsym, newest ABI first, and never writes to them.
namespace np = dynamiccl::nccl_plugin;

extern "C" DYNAMICCL_NCCL_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    np::kPluginName, np::initV2, np::getCollInfoV2, np::finalize};

extern "C" DYNAMICCL_NCCL_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    np::kPluginName, np::initV3, np::getCollInfoV3, np::finalize};

extern "C" DYNAMICCL_NCCL_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    np::kPluginName, np::initV4, np::getCollInfo, np::finalize};

extern "C" DYNAMICCL_NCCL_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    np::kPluginName, np::initV5, np::getCollInfo, np::finalize};

extern "C" DYNAMICCL_NCCL_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    np::kPluginName, np::initV6, np::getCollInfo, np::finalize, np::getChunkSize};

extern "C" DYNAMICCL_NCCL_EXPORT const ncclTuner_v7_t ncclTunerPlugin_v7 = {
    np::kPluginName, np::initV7, np::getCollInfo, np::finalize, np::getChunkSize};
