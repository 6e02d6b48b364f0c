// The emulated NCCL's side of the tuner plugin ABI, done as NCCL 2.28 does it: dlopen the file
// NCCL_TUNER_PLUGIN names (RTLD_NOW | RTLD_LOCAL), resolve ncclTunerPlugin_v5 (the version 2.28
// asks for first; our plugin always exports it, so the older fallbacks NCCL would try are not
// emulated), init it once per communicator with the rank and node counts and a logger, call
// getCollInfo on the calling thread for every collective, finalize at the end. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl_plugin/abi/tuner_v5.h"

namespace dynamiccl {
namespace emulated_nccl {

class LoadedTuner {
 public:
  // Loads and inits the plugin at `path` for a communicator; "" = no plugin. A file that does
  // not load or lacks the symbol leaves the communicator untuned, with one line on stderr, as
  // NCCL does (it never fails a communicator for its tuner).
  LoadedTuner(const std::string& path, uint64_t comm_id, size_t n_ranks, size_t n_nodes);
  ~LoadedTuner();
  LoadedTuner(const LoadedTuner&) = delete;
  LoadedTuner& operator=(const LoadedTuner&) = delete;

  bool loaded() const { return tuner_ != nullptr; }
  const std::string& failure() const { return failure_; }
  // NCCL's getCollInfo call: `table` is [NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] of µs with
  // NCCL_ALGO_PROTO_IGNORE where a pair is unavailable; the plugin may lower entries and set
  // *n_channels. No plugin: nothing changes.
  void get_coll_info(int coll_type, size_t n_bytes, float table[][NCCL_NUM_PROTOCOLS],
                     int* n_channels) const;

 private:
  void* handle_ = nullptr;
  const ncclTuner_v5_t* tuner_ = nullptr;
  void* context_ = nullptr;
  std::string failure_;
};

}  // namespace emulated_nccl
}  // namespace dynamiccl
