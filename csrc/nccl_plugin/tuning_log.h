// The tuner's report of each getCollInfo call, written through the logger NCCL hands to
// init, so it shows with NCCL_DEBUG=INFO (or TRACE) and NCCL_DEBUG_SUBSYS=TUNING.
#ifndef DYNAMICCL_NCCL_TUNING_LOG_H_
#define DYNAMICCL_NCCL_TUNING_LOG_H_

#include <stdint.h>

#include <atomic>

#include "abi/nccl_common.h"
#include "decision_channel.h"

namespace dynamiccl {
namespace nccl_plugin {

// One per communicator.
struct TuningLog {
  ncclDebugLogger_t logger;  // nullptr: NCCL gave none, nothing is logged
  uint64_t comm_id;
  std::atomic<unsigned> outcomes_seen;  // bit (1 << outcome) once logged at INFO
};

// Logs the `outcome` (enum dynamiccl_nccl_outcome) of `call`: at INFO the first time the
// communicator has that outcome, at TRACE afterwards, so INFO shows each kind once and
// TRACE shows every call. `decision` is the one published on the calling thread, or
// nullptr when there was none. Allocates nothing; returns at once without a logger.
void log_call(TuningLog& log, const CollCall& call, int outcome, const Decision* decision);

}  // namespace nccl_plugin
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_TUNING_LOG_H_
