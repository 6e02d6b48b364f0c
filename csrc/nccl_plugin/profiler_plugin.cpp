// The profiler plugin NCCL loads (ncclProfiler_v5, NCCL 2.28+): one ring record per
// collective NCCL launches, completed by the kernel-channel events that follow it.
//
// Event handles are opaque to NCCL (it only passes them back to us and tests them for
// NULL), so they encode the record id instead of pointing at memory: no allocation on the
// event path, and a late event for a record that was overwritten is recognised and dropped.
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "abi/profiler_v5.h"
#include "dynamiccl_nccl.h"
#include "nccl_names.h"
#include "profiler_ring.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

struct ProfilerContext {
  uint64_t comm_id;
};

std::atomic<uint64_t> g_profiler_inits{0};

// Handle layout: bit 0 = 1 (never NULL), bit 1 = kind, bits 2..9 = channel, bits 10.. = id.
enum HandleKind : uintptr_t { kCollHandle = 0, kKernelChHandle = 1 };

void* make_handle(uint64_t id, HandleKind kind, unsigned channel) {
  const uintptr_t v = (static_cast<uintptr_t>(id) << 10) | ((channel & 0xffu) << 2) |
                      (static_cast<uintptr_t>(kind) << 1) | 1u;
  return reinterpret_cast<void*>(v);
}

// Record id of a handle of the given kind, 0 if it is not one of ours of that kind.
uint64_t handle_id(const void* handle, HandleKind kind) {
  const auto v = reinterpret_cast<uintptr_t>(handle);
  if ((v & 1u) == 0 || ((v >> 1) & 1u) != kind) return 0;
  return static_cast<uint64_t>(v >> 10);
}

// ---- entry points, named after the ncclProfiler_v5_t members they implement -----------

ncclResult_t init(void** context, uint64_t commId, int* eActivationMask, const char* /*commName*/,
                  int /*nNodes*/, int /*nranks*/, int rank, ncclDebugLogger_t logfn) {
  if (context == nullptr) return ncclSuccess;
  auto* ctx = static_cast<ProfilerContext*>(std::calloc(1, sizeof(ProfilerContext)));
  *context = ctx;
  if (ctx == nullptr) return ncclInternalError;  // NCCL then runs without profiler
  ctx->comm_id = commId;
  g_profiler_inits.fetch_add(1, std::memory_order_relaxed);
  // Coll gives what NCCL ran; KernelCh gives GPU start/stop per channel. Nothing else:
  // proxy-step events are per network step and far more numerous.
  if (eActivationMask != nullptr) *eActivationMask = ncclProfileColl | ncclProfileKernelCh;
  if (logfn != nullptr) {
    logfn(NCCL_LOG_INFO, NCCL_INIT, __func__, __LINE__,
          "DynamICCL profiler: comm 0x%llx rank %d, recording Coll and KernelCh events",
          static_cast<unsigned long long>(commId), rank);
  }
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr) {
  if (eHandle == nullptr) return ncclSuccess;
  *eHandle = nullptr;  // untracked events get no handle, so NCCL sends nothing more
  if (context == nullptr || eDescr == nullptr) return ncclSuccess;

  if (eDescr->type == ncclProfileColl) {
    CollLaunch launch{};
    launch.comm_id = static_cast<const ProfilerContext*>(context)->comm_id;
    launch.seq_number = eDescr->coll.seqNumber;
    launch.count = eDescr->coll.count;
    launch.coll_type = coll_id(eDescr->coll.func);
    launch.algo = algo_id(eDescr->coll.algo);
    launch.proto = proto_id(eDescr->coll.proto);
    launch.nchannels = eDescr->coll.nChannels;
    launch.nwarps = eDescr->coll.nWarps;
    launch.rank = eDescr->rank;
    *eHandle = make_handle(ring_begin_record(launch), kCollHandle, 0);
  } else if (eDescr->type == ncclProfileKernelCh) {
    // Its parent is the Coll event; p2p parents carry no handle of ours and stay untracked.
    const uint64_t id = handle_id(eDescr->parentObj, kCollHandle);
    if (id == 0 || !ring_kernel_channel_start(id, eDescr->kernelCh.pTimer)) return ncclSuccess;
    *eHandle = make_handle(id, kKernelChHandle, eDescr->kernelCh.channelId);
  }
  return ncclSuccess;
}

ncclResult_t stopEvent(void* eHandle) {
  // A Coll stops when NCCL has enqueued it; its kernel channels report later.
  const uint64_t id = handle_id(eHandle, kKernelChHandle);
  if (id != 0) ring_kernel_channel_done(id);
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_v5_t eState,
                              ncclProfilerEventStateArgs_v5_t* eStateArgs) {
  const uint64_t id = handle_id(eHandle, kKernelChHandle);
  if (id != 0 && eState == ncclProfilerKernelChStop && eStateArgs != nullptr) {
    ring_kernel_channel_stop(id, eStateArgs->kernelCh.pTimer);
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  std::free(context);
  return ncclSuccess;
}

}  // namespace
}  // namespace nccl_plugin
}  // namespace dynamiccl

namespace np = dynamiccl::nccl_plugin;

extern "C" DYNAMICCL_NCCL_EXPORT const ncclProfiler_v5_t ncclProfiler_v5 = {
    "DynamICCL", np::init, np::startEvent, np::stopEvent, np::recordEventState, np::finalize};

extern "C" DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_profiler_loaded_by_nccl(void) {
  return np::g_profiler_inits.load(std::memory_order_relaxed) > 0 ? 1 : 0;
}
