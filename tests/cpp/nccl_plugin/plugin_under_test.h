// Loads libdynamiccl_nccl.so the way NCCL 2.26+ does (dlopen RTLD_NOW|RTLD_LOCAL, then
// dlsym by name) and gives the tests its plugin tables and C API, plus a cost-table
// stand-in laid out exactly as NCCL passes it.
#ifndef DYNAMICCL_TESTS_NCCL_PLUGIN_UNDER_TEST_H_
#define DYNAMICCL_TESTS_NCCL_PLUGIN_UNDER_TEST_H_

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "nccl_plugin/abi/profiler_v5.h"
#include "nccl_plugin/abi/tuner_v2.h"
#include "nccl_plugin/abi/tuner_v3.h"
#include "nccl_plugin/abi/tuner_v4.h"
#include "nccl_plugin/abi/tuner_v5.h"
#include "nccl_plugin/abi/tuner_v6.h"
#include "nccl_plugin/abi/tuner_v7.h"
#include "nccl_plugin/dynamiccl_nccl.h"

namespace dynamiccl {
namespace testing {

class PluginUnderTest {
 public:
  static PluginUnderTest& get() {
    static PluginUnderTest plugin;
    return plugin;
  }

  void* handle() const { return handle_; }

  template <class T>
  const T* table(const char* symbol) const {
    return static_cast<const T*>(dlsym(handle_, symbol));
  }

  const ncclTuner_v2_t* v2() const { return table<ncclTuner_v2_t>("ncclTunerPlugin_v2"); }
  const ncclTuner_v3_t* v3() const { return table<ncclTuner_v3_t>("ncclTunerPlugin_v3"); }
  const ncclTuner_v4_t* v4() const { return table<ncclTuner_v4_t>("ncclTunerPlugin_v4"); }
  const ncclTuner_v5_t* v5() const { return table<ncclTuner_v5_t>("ncclTunerPlugin_v5"); }
  const ncclTuner_v6_t* v6() const { return table<ncclTuner_v6_t>("ncclTunerPlugin_v6"); }
  const ncclTuner_v7_t* v7() const { return table<ncclTuner_v7_t>("ncclTunerPlugin_v7"); }
  const ncclProfiler_v5_t* profiler() const { return table<ncclProfiler_v5_t>("ncclProfiler_v5"); }

  // The decision API as a group uses it, on the test's channel (channel()).
  void publish(int coll, size_t bytes, int algo, int proto, int channels) const {
    publish_fn(channel_, coll, bytes, algo, proto, channels);
  }
  void publish_chunk(int coll, size_t bytes, int algo, int proto, int channels,
                     size_t chunk) const {
    publish_chunk_fn(channel_, coll, bytes, algo, proto, channels, chunk);
  }
  void clear() const { clear_fn(channel_); }
  int last_outcome() const { return last_outcome_fn(channel_); }
  int last_channels(int coll, size_t bytes) const {
    return last_channels_fn(channel_, coll, bytes);
  }
  // A fresh channel, expected by every communicator created from now on (any size).
  void open_test_channel() {
    if (channel_ != 0) channel_close(channel_);
    channel_ = channel_open();
    expect_comm(channel_, 0);
  }
  int channel() const { return channel_; }

  void (*publish_fn)(int, int, size_t, int, int, int) = nullptr;
  void (*publish_chunk_fn)(int, int, size_t, int, int, int, size_t) = nullptr;
  void (*clear_fn)(int) = nullptr;
  int (*last_outcome_fn)(int) = nullptr;
  int (*last_channels_fn)(int, int, size_t) = nullptr;
  int (*channel_open)() = nullptr;
  void (*channel_close)(int) = nullptr;
  void (*expect_comm)(int, size_t) = nullptr;
  int (*comms_bound)(int) = nullptr;
  void (*get_counters)(dynamiccl_nccl_counters*) = nullptr;
  int (*loaded_by_nccl)() = nullptr;
  size_t (*profiler_read)(uint64_t, dynamiccl_nccl_coll_record*, size_t) = nullptr;
  int (*profiler_loaded_by_nccl)() = nullptr;

  dynamiccl_nccl_counters counters() const {
    dynamiccl_nccl_counters c{};
    get_counters(&c);
    return c;
  }

 private:
  PluginUnderTest() {
    handle_ = dlopen(DYNAMICCL_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) return;
    resolve(publish_fn, "dynamiccl_nccl_publish");
    resolve(publish_chunk_fn, "dynamiccl_nccl_publish_chunk");
    resolve(clear_fn, "dynamiccl_nccl_clear");
    resolve(last_outcome_fn, "dynamiccl_nccl_last_outcome");
    resolve(last_channels_fn, "dynamiccl_nccl_last_channels");
    resolve(channel_open, "dynamiccl_nccl_channel_open");
    resolve(channel_close, "dynamiccl_nccl_channel_close");
    resolve(expect_comm, "dynamiccl_nccl_expect_comm");
    resolve(comms_bound, "dynamiccl_nccl_comms_bound");
    resolve(get_counters, "dynamiccl_nccl_get_counters");
    resolve(loaded_by_nccl, "dynamiccl_nccl_loaded_by_nccl");
    resolve(profiler_read, "dynamiccl_nccl_profiler_read");
    resolve(profiler_loaded_by_nccl, "dynamiccl_nccl_profiler_loaded_by_nccl");
  }

  template <class Fn>
  void resolve(Fn& fn, const char* symbol) {
    fn = reinterpret_cast<Fn>(dlsym(handle_, symbol));
  }

  void* handle_ = nullptr;
  int channel_ = 0;
};

// Every test starts from a loaded library and a fresh decision channel that the communicators
// it creates bind to.
class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(plugin().handle(), nullptr) << dlerror();
    ASSERT_NE(plugin().publish_fn, nullptr);
    ASSERT_NE(plugin().channel_open, nullptr);
    ASSERT_NE(plugin().get_counters, nullptr);
    plugin().open_test_channel();
    ASSERT_NE(plugin().channel(), 0);
  }
  static PluginUnderTest& plugin() { return PluginUnderTest::get(); }
};

// NCCL's cost table: float[num_algo][num_proto] on the stack, passed as float**. Guard
// cells after the table catch writes past num_algo x num_proto.
struct CostTable {
  static constexpr int kProto = DYNAMICCL_NCCL_NUM_PROTOS;
  static constexpr int kGuard = 8;
  static constexpr float kGuardValue = 12345.0f;
  int num_algo;
  float cells[DYNAMICCL_NCCL_NUM_ALGOS * kProto + kGuard];

  // Every (algo, proto) available with a distinct positive cost, except those listed.
  explicit CostTable(int algos) : num_algo(algos) {
    for (int i = 0; i < num_algo * kProto; ++i) cells[i] = 10.0f + 1.5f * static_cast<float>(i);
    for (int i = num_algo * kProto; i < num_algo * kProto + kGuard; ++i) cells[i] = kGuardValue;
  }
  float& at(int algo, int proto) { return cells[algo * kProto + proto]; }
  float** arg() { return reinterpret_cast<float**>(cells); }
  void mark_unavailable(int algo, int proto) { at(algo, proto) = -1.0f; }

  bool guards_intact() const {
    for (int i = num_algo * kProto; i < num_algo * kProto + kGuard; ++i) {
      if (cells[i] != kGuardValue) return false;
    }
    return true;
  }

  // NCCL's selection after the tuner returns: strict minimum over entries >= 0, scanning
  // algorithms then protocols. {-1, -1} when nothing is available.
  std::pair<int, int> nccl_choice() const {
    std::pair<int, int> best{-1, -1};
    float best_cost = 0.0f;
    for (int a = 0; a < num_algo; ++a) {
      for (int p = 0; p < kProto; ++p) {
        const float c = cells[a * kProto + p];
        if (c < 0.0f) continue;
        if (best.first < 0 || c < best_cost) {
          best = {a, p};
          best_cost = c;
        }
      }
    }
    return best;
  }
};

}  // namespace testing
}  // namespace dynamiccl

#endif  // DYNAMICCL_TESTS_NCCL_PLUGIN_UNDER_TEST_H_
