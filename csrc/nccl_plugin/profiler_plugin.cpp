// The profiler plugin NCCL loads (ncclProfiler_v5, NCCL 2.28+): one ring record per
// collective NCCL launches, completed by the kernel-channel events that follow it.
//
// Event handles are opaque to NCCL (it only passes them back to us and tests them for
// NULL), so they encode the record id instead of pointing at memory: no allocation on the
// event path, and a late event for a record that was overwritten is recognised and dropped.
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "dynamiccl_nccl.h"
#include "plugin_abi.h"
#include "profiler_ring.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

using nccl_abi::LogFn;
using nccl_abi::ProfilerEventDescrV5;
using nccl_abi::ProfilerEventStateArgsV5;
using nccl_abi::Result;
using nccl_abi::kSuccess;

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

// NCCL names algorithms/protocols/functions in text ("RING", "NVLS_TREE", "Simple"...),
// spelled differently across versions: compare ignoring case and underscores.
bool same_name(const char* nccl, const char* ours) {
  if (nccl == nullptr) return false;
  while (true) {
    while (*nccl == '_') ++nccl;
    if (std::tolower(static_cast<unsigned char>(*nccl)) !=
        std::tolower(static_cast<unsigned char>(*ours))) {
      return false;
    }
    if (*ours == '\0') return true;
    ++nccl;
    ++ours;
  }
}

int index_of(const char* name, const char* const* names, int count) {
  for (int i = 0; i < count; ++i) {
    if (same_name(name, names[i])) return i;
  }
  return -1;
}

// Indexed by the DYNAMICCL_NCCL_COLL_*, _ALGO_* and _PROTO_* values.
const char* const kCollNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                  "AllReduce"};
const char* const kAlgoNames[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain",
                                  "NVLS", "NVLSTree", "PAT"};
const char* const kProtoNames[] = {"LL", "LL128", "Simple"};
static_assert(sizeof(kCollNames) / sizeof(*kCollNames) == DYNAMICCL_NCCL_NUM_COLLS, "colls");
static_assert(sizeof(kAlgoNames) / sizeof(*kAlgoNames) == DYNAMICCL_NCCL_NUM_ALGOS, "algos");
static_assert(sizeof(kProtoNames) / sizeof(*kProtoNames) == DYNAMICCL_NCCL_NUM_PROTOS, "protos");

Result profiler_init(void** context, uint64_t comm_id, int* activation_mask,
                     const char* /*comm_name*/, int /*n_nodes*/, int /*n_ranks*/, int rank,
                     LogFn log) {
  if (context == nullptr) return kSuccess;
  auto* ctx = static_cast<ProfilerContext*>(std::calloc(1, sizeof(ProfilerContext)));
  *context = ctx;
  if (ctx == nullptr) return nccl_abi::kInternalError;  // NCCL then runs without profiler
  ctx->comm_id = comm_id;
  g_profiler_inits.fetch_add(1, std::memory_order_relaxed);
  // Coll gives what NCCL ran; KernelCh gives GPU start/stop per channel. Nothing else:
  // proxy-step events are per network step and far more numerous.
  if (activation_mask != nullptr) {
    *activation_mask = static_cast<int>(nccl_abi::kProfileColl | nccl_abi::kProfileKernelCh);
  }
  if (log != nullptr) {
    log(nccl_abi::kLogInfo, nccl_abi::kLogSubsysInit, "dynamiccl_nccl", __LINE__,
        "DynamICCL profiler: comm 0x%llx rank %d, recording Coll and KernelCh events",
        static_cast<unsigned long long>(comm_id), rank);
  }
  return kSuccess;
}

Result profiler_start_event(void* context, void** event_handle, ProfilerEventDescrV5* descr) {
  if (event_handle == nullptr) return kSuccess;
  *event_handle = nullptr;  // untracked events get no handle, so NCCL sends nothing more
  if (context == nullptr || descr == nullptr) return kSuccess;

  if (descr->type == nccl_abi::kProfileColl) {
    CollLaunch launch{};
    launch.comm_id = static_cast<const ProfilerContext*>(context)->comm_id;
    launch.seq_number = descr->coll.seq_number;
    launch.count = descr->coll.count;
    launch.coll_type = index_of(descr->coll.func, kCollNames, DYNAMICCL_NCCL_NUM_COLLS);
    launch.algo = index_of(descr->coll.algo, kAlgoNames, DYNAMICCL_NCCL_NUM_ALGOS);
    launch.proto = index_of(descr->coll.proto, kProtoNames, DYNAMICCL_NCCL_NUM_PROTOS);
    launch.nchannels = descr->coll.n_channels;
    launch.nwarps = descr->coll.n_warps;
    launch.rank = descr->rank;
    *event_handle = make_handle(ring_begin_record(launch), kCollHandle, 0);
  } else if (descr->type == nccl_abi::kProfileKernelCh) {
    // Its parent is the Coll event; p2p parents carry no handle of ours and stay untracked.
    const uint64_t id = handle_id(descr->parent_obj, kCollHandle);
    if (id == 0 || !ring_kernel_channel_start(id, descr->kernel_ch.p_timer)) return kSuccess;
    *event_handle = make_handle(id, kKernelChHandle, descr->kernel_ch.channel_id);
  }
  return kSuccess;
}

Result profiler_stop_event(void* event_handle) {
  // A Coll stops when NCCL has enqueued it; its kernel channels report later.
  const uint64_t id = handle_id(event_handle, kKernelChHandle);
  if (id != 0) ring_kernel_channel_done(id);
  return kSuccess;
}

Result profiler_record_event_state(void* event_handle, int state,
                                   ProfilerEventStateArgsV5* args) {
  const uint64_t id = handle_id(event_handle, kKernelChHandle);
  if (id != 0 && state == nccl_abi::kStateKernelChStop && args != nullptr) {
    ring_kernel_channel_stop(id, args->kernel_ch.p_timer);
  }
  return kSuccess;
}

Result profiler_finalize(void* context) {
  std::free(context);
  return kSuccess;
}

}  // namespace
}  // namespace nccl_plugin
}  // namespace dynamiccl

extern "C" DYNAMICCL_NCCL_EXPORT const dynamiccl::nccl_abi::ProfilerV5 ncclProfiler_v5 = {
    "DynamICCL",
    dynamiccl::nccl_plugin::profiler_init,
    dynamiccl::nccl_plugin::profiler_start_event,
    dynamiccl::nccl_plugin::profiler_stop_event,
    dynamiccl::nccl_plugin::profiler_record_event_state,
    dynamiccl::nccl_plugin::profiler_finalize};

extern "C" DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_profiler_loaded_by_nccl(void) {
  return dynamiccl::nccl_plugin::g_profiler_inits.load(std::memory_order_relaxed) > 0 ? 1 : 0;
}
