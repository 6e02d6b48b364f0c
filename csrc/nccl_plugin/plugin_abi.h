// NCCL's plugin ABI, declared here so the plugin needs no NCCL headers.
//
// Written from the ABI as described in the project's research notes (tuner v2..v6,
// profiler v5); only layout matters, so names follow this project's style. Every struct
// NCCL hands us is read-only to us except the cost table and the output integers.
#ifndef DYNAMICCL_NCCL_PLUGIN_ABI_H_
#define DYNAMICCL_NCCL_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

namespace dynamiccl {
namespace nccl_abi {

// ncclResult_t is a C enum: int-sized, 0 = success.
using Result = int;
constexpr Result kSuccess = 0;
constexpr Result kInternalError = 3;

// ncclDebugLogger_t.
using LogFn = void (*)(int level, unsigned long flags, const char* file, int line,
                       const char* fmt, ...);
constexpr int kLogInfo = 3;
constexpr unsigned long kLogSubsysInit = 0x1;
constexpr unsigned long kLogSubsysTuning = 0x40;

// NCCL_ALGO_PROTO_IGNORE: a cost-table entry NCCL does not offer for this call.
constexpr float kIgnoreCost = -1.0f;

// ---- tuner ----------------------------------------------------------------------------

// v2 (NCCL 2.21): direct algorithm/protocol outputs, NCCL pre-sets them to -1.
struct TunerV2 {
  const char* name;
  Result (*init)(size_t n_ranks, size_t n_nodes, LogFn log, void** context);
  Result (*get_coll_info)(void* context, int coll_type, size_t n_bytes, int collnet_support,
                          int nvls_support, int num_pipe_ops, int* algorithm, int* protocol,
                          int* n_channels);
  Result (*destroy)(void* context);
};

// v3 (NCCL 2.22-2.23): in/out cost table float[numAlgo][numProto] passed as float**.
struct TunerV3 {
  const char* name;
  Result (*init)(size_t n_ranks, size_t n_nodes, LogFn log, void** context);
  Result (*get_coll_info)(void* context, int coll_type, size_t n_bytes, int num_pipe_ops,
                          float** cost_table, int num_algo, int num_proto, int* n_channels);
  Result (*destroy)(void* context);
};

// v4 (NCCL 2.24-2.27): v3 plus regBuff before nChannels.
struct TunerV4 {
  const char* name;
  Result (*init)(size_t n_ranks, size_t n_nodes, LogFn log, void** context);
  Result (*get_coll_info)(void* context, int coll_type, size_t n_bytes, int num_pipe_ops,
                          float** cost_table, int num_algo, int num_proto, int reg_buff,
                          int* n_channels);
  Result (*destroy)(void* context);
};

// v5 (NCCL 2.28-2.29): init gets the communicator id, NVLink-domain info and the in/out
// model constants (we leave both untouched, so they stay opaque); finalize replaces destroy.
struct TunerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes, LogFn log,
                 void* nvl_domain_info, void* constants);
  Result (*get_coll_info)(void* context, int coll_type, size_t n_bytes, int num_pipe_ops,
                          float** cost_table, int num_algo, int num_proto, int reg_buff,
                          int* n_channels);
  Result (*finalize)(void* context);
};

// v6 (NCCL 2.30+): v5 plus an optional chunk-size hook (NULL = keep NCCL's).
struct TunerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes, LogFn log,
                 void* nvl_domain_info, void* constants);
  Result (*get_coll_info)(void* context, int coll_type, size_t n_bytes, int num_pipe_ops,
                          float** cost_table, int num_algo, int num_proto, int reg_buff,
                          int* n_channels);
  Result (*finalize)(void* context);
  Result (*get_chunk_size)(void* context, int coll_type, size_t n_bytes, int algo, int proto,
                           int n_channels, size_t* chunk_size);
};

// ---- profiler v5 (NCCL 2.28+) -----------------------------------------------------------

// Event type bits (also the activation mask bits).
constexpr uint64_t kProfileColl = 1u << 1;
constexpr uint64_t kProfileKernelCh = 1u << 6;
// Event state reported with the GPU stop time of one kernel channel.
constexpr int kStateKernelChStop = 22;

// ncclProfilerEventDescr_v5_t, reduced to the union members we read. Each member of NCCL's
// union starts at the union's start and the union is 8-byte aligned in both, so the
// offsets of these fields are NCCL's (checked by the static_asserts below).
struct ProfilerEventDescrV5 {
  uint64_t type;
  void* parent_obj;
  int rank;
  union {
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t n_channels;
      uint8_t n_warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      uint8_t channel_id;
      uint64_t p_timer;  // GPU globaltimer at the channel's start, ns
    } kernel_ch;
  };
};

// ncclProfilerEventStateArgs_v5_t: a union whose kernelCh member is one uint64 at offset 0.
union ProfilerEventStateArgsV5 {
  struct {
    uint64_t p_timer;  // GPU globaltimer at the channel's stop, ns
  } kernel_ch;
  uint64_t raw;
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name,
                 int n_nodes, int n_ranks, int rank, LogFn log);
  Result (*start_event)(void* context, void** event_handle, ProfilerEventDescrV5* descr);
  Result (*stop_event)(void* event_handle);
  Result (*record_event_state)(void* event_handle, int state, ProfilerEventStateArgsV5* args);
  Result (*finalize)(void* context);
};

// Offsets of NCCL's x86-64/aarch64 LP64 layout.
static_assert(offsetof(ProfilerEventDescrV5, rank) == 16, "descr.rank");
static_assert(offsetof(ProfilerEventDescrV5, coll.seq_number) == 24, "descr.coll.seqNumber");
static_assert(offsetof(ProfilerEventDescrV5, coll.count) == 56, "descr.coll.count");
static_assert(offsetof(ProfilerEventDescrV5, coll.n_channels) == 80, "descr.coll.nChannels");
static_assert(offsetof(ProfilerEventDescrV5, coll.algo) == 88, "descr.coll.algo");
static_assert(offsetof(ProfilerEventDescrV5, coll.proto) == 96, "descr.coll.proto");
static_assert(offsetof(ProfilerEventDescrV5, kernel_ch.p_timer) == 32, "descr.kernelCh.pTimer");

}  // namespace nccl_abi
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_PLUGIN_ABI_H_
