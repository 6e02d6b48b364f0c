// Fixed-size, lock-free ring of per-collective records written by the profiler plugin and
// read through dynamiccl_nccl_profiler_read(). Any number of threads may write and read.
#ifndef DYNAMICCL_NCCL_PROFILER_RING_H_
#define DYNAMICCL_NCCL_PROFILER_RING_H_

#include <stdint.h>

namespace dynamiccl {
namespace nccl_plugin {

// What NCCL tells the profiler when it launches one collective.
struct CollLaunch {
  uint64_t comm_id;
  uint64_t seq_number;
  uint64_t count;
  int coll_type;
  int algo;
  int proto;
  int nchannels;
  int nwarps;
  int rank;
};

// Claims the next record, fills it and returns its id (1, 2, ...).
uint64_t ring_begin_record(const CollLaunch& launch);

// Kernel-channel facts for record `id` (GPU globaltimer ns). They are dropped when the
// record has been overwritten by a newer one, or when the time is 0 (unknown).
// Returns whether record `id` is still in the ring.
bool ring_kernel_channel_start(uint64_t id, uint64_t start_ns);
void ring_kernel_channel_stop(uint64_t id, uint64_t stop_ns);
void ring_kernel_channel_done(uint64_t id);

}  // namespace nccl_plugin
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_PROFILER_RING_H_
