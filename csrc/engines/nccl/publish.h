// How a decision reaches NCCL: published on the calling thread for our tuner plugin right before
// the call, which NCCL's getCollInfo consults synchronously on the same thread (blocking
// communicators), and what the plugin reports back.
#pragma once

#include <cstdint>

#include "core/types.h"

namespace dynamiccl {

// Publishes the action for the NCCL call this thread issues next (default action: clears).
void nccl_publish(OpKind op, uint64_t effective_bytes, const Action& action);
void nccl_clear();
// True when NCCL consulted the plugin for the last call and could not apply the arm.
bool nccl_last_outcome_unavailable();
// The channels NCCL settled on for this thread's last call, of `op` and `effective_bytes`, since
// the last publish (NCCL >= 2.30 says so to the tuner); 0 when it did not say.
int nccl_last_channels(OpKind op, uint64_t effective_bytes);
// True once NCCL in this process initialised the plugin (a communicator exists).
bool nccl_plugin_loaded();

}  // namespace dynamiccl
