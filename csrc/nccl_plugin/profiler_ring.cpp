// The record ring. Each record is guarded by its `id` like a sequence lock: a writer
// marks it busy, fills it, then publishes the id; a reader keeps a copy only if the id was
// the expected one before and after copying. Every field is an atomic (relaxed), so
// concurrent access is well defined; kernel times are merged with atomic min/max because
// NCCL's proxy thread reports channels one by one, after the launch.
#include "profiler_ring.h"

#include <atomic>
#include <cstddef>

#include "dynamiccl_nccl.h"

namespace dynamiccl {
namespace nccl_plugin {
namespace {

constexpr uint64_t kRingSize = DYNAMICCL_NCCL_PROFILER_RING_SIZE;
static_assert((kRingSize & (kRingSize - 1)) == 0, "ring size must be a power of two");

// Id of a record that is being (re)written; real ids start at 1.
constexpr uint64_t kBusy = ~0ull;

struct alignas(64) Record {
  std::atomic<uint64_t> id{0};
  std::atomic<uint64_t> comm_id{0};
  std::atomic<uint64_t> seq_number{0};
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> kernel_start_ns{0};
  std::atomic<uint64_t> kernel_stop_ns{0};
  std::atomic<int32_t> coll_type{0};
  std::atomic<int32_t> algo{0};
  std::atomic<int32_t> proto{0};
  std::atomic<int32_t> nchannels{0};
  std::atomic<int32_t> nwarps{0};
  std::atomic<int32_t> rank{0};
  std::atomic<int32_t> channels_done{0};
};

Record g_ring[kRingSize];
std::atomic<uint64_t> g_last_id{0};  // ids handed out so far

Record& slot_of(uint64_t id) { return g_ring[(id - 1) & (kRingSize - 1)]; }

// The record still holding `id`, or nullptr once it was overwritten. An update can still
// race with a rewrite that starts right after this check; that needs a full ring of newer
// launches while one kernel channel is being reported, and costs one wrong time at most.
Record* live_record(uint64_t id) {
  if (id == 0) return nullptr;
  Record& r = slot_of(id);
  return r.id.load(std::memory_order_acquire) == id ? &r : nullptr;
}

}  // namespace

uint64_t ring_begin_record(const CollLaunch& launch) {
  const auto relaxed = std::memory_order_relaxed;
  const uint64_t id = g_last_id.fetch_add(1, relaxed) + 1;
  Record& r = slot_of(id);
  r.id.store(kBusy, relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // busy before any field changes
  r.comm_id.store(launch.comm_id, relaxed);
  r.seq_number.store(launch.seq_number, relaxed);
  r.count.store(launch.count, relaxed);
  r.kernel_start_ns.store(0, relaxed);
  r.kernel_stop_ns.store(0, relaxed);
  r.coll_type.store(launch.coll_type, relaxed);
  r.algo.store(launch.algo, relaxed);
  r.proto.store(launch.proto, relaxed);
  r.nchannels.store(launch.nchannels, relaxed);
  r.nwarps.store(launch.nwarps, relaxed);
  r.rank.store(launch.rank, relaxed);
  r.channels_done.store(0, relaxed);
  r.id.store(id, std::memory_order_release);
  return id;
}

bool ring_kernel_channel_start(uint64_t id, uint64_t start_ns) {
  Record* r = live_record(id);
  if (r == nullptr) return false;
  if (start_ns == 0) return true;
  uint64_t cur = r->kernel_start_ns.load(std::memory_order_relaxed);
  while ((cur == 0 || start_ns < cur) &&
         !r->kernel_start_ns.compare_exchange_weak(cur, start_ns, std::memory_order_relaxed)) {
  }
  return true;
}

void ring_kernel_channel_stop(uint64_t id, uint64_t stop_ns) {
  Record* r = live_record(id);
  if (r == nullptr || stop_ns == 0) return;
  uint64_t cur = r->kernel_stop_ns.load(std::memory_order_relaxed);
  while (stop_ns > cur &&
         !r->kernel_stop_ns.compare_exchange_weak(cur, stop_ns, std::memory_order_relaxed)) {
  }
}

void ring_kernel_channel_done(uint64_t id) {
  Record* r = live_record(id);
  if (r != nullptr) r->channels_done.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace nccl_plugin
}  // namespace dynamiccl

extern "C" DYNAMICCL_NCCL_EXPORT size_t dynamiccl_nccl_profiler_read(
    uint64_t after_id, struct dynamiccl_nccl_coll_record* out, size_t max_records) {
  using namespace dynamiccl::nccl_plugin;
  if (out == nullptr || max_records == 0) return 0;
  const auto relaxed = std::memory_order_relaxed;
  const uint64_t last = g_last_id.load(std::memory_order_acquire);
  const uint64_t oldest = last > kRingSize ? last - kRingSize + 1 : 1;
  size_t n = 0;
  for (uint64_t id = after_id + 1 > oldest ? after_id + 1 : oldest; id <= last; ++id) {
    if (n == max_records) break;
    Record& r = slot_of(id);
    if (r.id.load(std::memory_order_acquire) != id) continue;  // overwritten or in flight
    dynamiccl_nccl_coll_record c{};
    c.id = id;
    c.comm_id = r.comm_id.load(relaxed);
    c.seq_number = r.seq_number.load(relaxed);
    c.count = r.count.load(relaxed);
    c.kernel_start_ns = r.kernel_start_ns.load(relaxed);
    c.kernel_stop_ns = r.kernel_stop_ns.load(relaxed);
    c.coll_type = r.coll_type.load(relaxed);
    c.algo = r.algo.load(relaxed);
    c.proto = r.proto.load(relaxed);
    c.nchannels = r.nchannels.load(relaxed);
    c.nwarps = r.nwarps.load(relaxed);
    c.rank = r.rank.load(relaxed);
    c.kernel_channels_done = r.channels_done.load(relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);  // copy before the re-check
    if (r.id.load(relaxed) != id) continue;
    out[n++] = c;
  }
  return n;
}
