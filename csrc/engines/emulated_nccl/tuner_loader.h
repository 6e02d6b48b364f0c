// The emulated NCCL's side of the tuner plugin ABI, done as NCCL does it: dlopen the file
// NCCL_TUNER_PLUGIN names (RTLD_NOW | RTLD_LOCAL), resolve the newest ncclTunerPlugin_vN the
// emulated release knows (2.28: v5; 2.30: v6, then v5; 2.32: v7, then v6, then v5), init it
// once per communicator with the rank and node counts, a logger and the model constants of the
// ABI, call getCollInfo for every collective and, from 2.30, getChunkSize once algorithm,
// protocol and channels are settled, finalize at the end. (Our plugin exports every version, so
// the older fallbacks NCCL would try are not emulated.)
//
// A blocking communicator calls the tuner on the thread that issues the collective; a
// non-blocking one (nonblocking = true) on a thread of NCCL's own, while the issuing thread waits
// for the call to be prepared, as NCCL's non-blocking callers poll until it is. Torch-free.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "nccl_plugin/abi/tuner_v7.h"

namespace dynamiccl {
namespace emulated_nccl {

// The NCCL release the emulation behaves as towards the tuner (DYNAMICCL_EMULATE_NCCL_VERSION).
enum class NcclRelease { k2_28, k2_30, k2_32 };

// One thread that runs what it is given, one task at a time, while the giver waits.
class HelperThread {
 public:
  HelperThread();
  ~HelperThread();
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;
  void run(const std::function<void()>& task);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* task_ = nullptr;
  bool done_ = false, stop_ = false;
  std::thread thread_;
};

class LoadedTuner {
 public:
  // Loads and inits the plugin at `path` for a communicator; "" = no plugin. A file that does
  // not load or lacks the symbol leaves the communicator untuned, with one line on stderr, as
  // NCCL does (it never fails a communicator for its tuner).
  LoadedTuner(const std::string& path, NcclRelease release, uint64_t comm_id, size_t n_ranks,
              size_t n_nodes, bool nonblocking);
  ~LoadedTuner();
  LoadedTuner(const LoadedTuner&) = delete;
  LoadedTuner& operator=(const LoadedTuner&) = delete;

  bool loaded() const { return tuner_ != nullptr; }
  int abi() const { return abi_; }
  const std::string& failure() const { return failure_; }
  // NCCL's getCollInfo call: `table` is [NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] of µs with
  // NCCL_ALGO_PROTO_IGNORE where a pair is unavailable; the plugin may lower entries and set
  // *n_channels. No plugin: nothing changes.
  void get_coll_info(int coll_type, size_t n_bytes, float table[][NCCL_NUM_PROTOCOLS],
                     int* n_channels) const;
  // NCCL 2.30's getChunkSize (ABI v6 and v7, when the plugin offers it): *chunk holds NCCL's
  // value and may be rewritten. Otherwise nothing changes.
  void get_chunk_size(int coll_type, size_t n_bytes, int algo, int proto, int n_channels,
                      size_t* chunk) const;

 private:
  // Runs `call` where NCCL calls the tuner: here, or on the helper thread (non-blocking).
  void on_nccl_thread(const std::function<void()>& call) const;
  void init(uint64_t comm_id, size_t n_ranks, size_t n_nodes);

  void* handle_ = nullptr;
  const ncclTuner_v5_t* tuner_ = nullptr;  // v6 and v7 begin as v5 does (init's last argument
                                           // aside, which init() passes by ABI)
  decltype(ncclTuner_v6_t::getChunkSize) get_chunk_size_ = nullptr;
  int abi_ = 0;
  void* context_ = nullptr;
  std::string failure_;
  std::unique_ptr<HelperThread> helper_;  // non-blocking: NCCL's own thread
};

}  // namespace emulated_nccl
}  // namespace dynamiccl
