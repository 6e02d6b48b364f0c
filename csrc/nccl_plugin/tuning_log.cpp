// NCCL filters messages by level and subsystem inside its logger, so every call is handed
// to it and NCCL_DEBUG / NCCL_DEBUG_SUBSYS decide what is printed.
#include "tuning_log.h"

#include <cstdio>

#include "dynamiccl_nccl.h"
#include "nccl_names.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

const char* outcome_name(int outcome) {
  switch (outcome) {
    case DYNAMICCL_NCCL_APPLIED: return "applied";
    case DYNAMICCL_NCCL_ABSTAINED: return "abstained";
    case DYNAMICCL_NCCL_UNAVAILABLE: return "unavailable";
    case DYNAMICCL_NCCL_MISMATCHED: return "mismatched";
    default: return "unknown";
  }
}

// "algo Ring, proto Simple, channels 8"; a part left to NCCL reads "any".
void describe_request(const Decision& d, char* out, size_t size) {
  char channels[16] = "any";
  if (d.nchannels > 0) std::snprintf(channels, sizeof channels, "%d", d.nchannels);
  std::snprintf(out, size, "algo %s, proto %s, channels %s", d.algo < 0 ? "any" : algo_name(d.algo),
                d.proto < 0 ? "any" : proto_name(d.proto), channels);
}

// Why the call ended as it did, for the parenthesis of the log line.
void describe_outcome(int outcome, const Decision* decision, char* out, size_t size) {
  if (decision == nullptr) {
    std::snprintf(out, size, "nothing published on its channel");
    return;
  }
  char request[96];
  describe_request(*decision, request, sizeof request);
  switch (outcome) {
    case DYNAMICCL_NCCL_UNAVAILABLE:
      std::snprintf(out, size, "%s: not offered for this call, NCCL decides", request);
      break;
    case DYNAMICCL_NCCL_MISMATCHED:
      std::snprintf(out, size, "the decision is for %s %zu bytes alone and stays; NCCL decides",
                    coll_name(decision->coll_type), decision->nbytes);
      break;
    default: std::snprintf(out, size, "%s", request);
  }
}

// Whether this is the communicator's first call with `outcome` (racing calls: one wins).
bool first_of_its_kind(TuningLog& log, int outcome) {
  const unsigned bit = 1u << outcome;
  if ((log.outcomes_seen.load(std::memory_order_relaxed) & bit) != 0) return false;
  return (log.outcomes_seen.fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
}

}  // namespace

void log_call(TuningLog& log, const CollCall& call, int outcome, const Decision* decision) {
  if (log.logger == nullptr) return;
  const bool first = first_of_its_kind(log, outcome);
  char why[192];
  describe_outcome(outcome, decision, why, sizeof why);
  log.logger(first ? NCCL_LOG_INFO : NCCL_LOG_TRACE, NCCL_TUNING, __func__, __LINE__,
             "DynamICCL tuner: comm 0x%llx %s %zu bytes numPipeOps %d -> %s (%s)%s",
             static_cast<unsigned long long>(log.comm_id), coll_name(call.coll_type), call.nbytes,
             call.num_pipe_ops, outcome_name(outcome), why,
             first ? "; first on this communicator, the next ones at TRACE level" : "");
}

}  // namespace nccl_plugin
}  // namespace dynamiccl
