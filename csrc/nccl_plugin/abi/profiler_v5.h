/*
 * Profiler plugin ABI v5, exported as ncclProfiler_v5 and used by NCCL 2.28 and later.
 *
 * NCCL opens an event with startEvent (the plugin returns an opaque handle, NULL for
 * "not interested"), may report state changes with recordEventState, and closes it with
 * stopEvent. Which event types NCCL sends at all is the mask the plugin sets in init;
 * NCCL keeps re-reading it through the pointer it passed.
 */
#ifndef DYNAMICCL_NCCL_ABI_PROFILER_V5_H_
#define DYNAMICCL_NCCL_ABI_PROFILER_V5_H_

#include "nccl_common.h"

/* Event types: ncclProfilerEventDescr_v5_t.type, and the bits of the activation mask. */
enum {
  ncclProfileGroup = 1 << 0,
  ncclProfileColl = 1 << 1, /* one collective as launched: what NCCL chose for it */
  ncclProfileP2p = 1 << 2,
  ncclProfileProxyOp = 1 << 3,
  ncclProfileProxyStep = 1 << 4,
  ncclProfileProxyCtrl = 1 << 5,
  ncclProfileKernelCh = 1 << 6, /* one channel of a collective's kernel, GPU-timed */
  ncclProfileNetPlugin = 1 << 7,
  ncclProfileGroupApi = 1 << 8,
  ncclProfileCollApi = 1 << 9,
  ncclProfileP2pApi = 1 << 10,
  ncclProfileKernelLaunch = 1 << 11
};

/* State transitions passed to recordEventState. Only the one this plugin reads is
 * declared; its value is NCCL's. */
typedef enum {
  ncclProfilerKernelChStop = 22 /* the kernel channel ended; args carry its GPU stop time */
} ncclProfilerEventState_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;

/*
 * What NCCL tells startEvent. NCCL's union has one member per event type; this one keeps
 * only the Coll and KernelCh members. Every member starts at the union's start, so their
 * offsets are NCCL's (checked below); NCCL owns the memory, so the smaller size does not
 * matter to a plugin.
 */
typedef struct {
  uint64_t type;   /* one ncclProfile* value */
  void* parentObj; /* handle the plugin returned for the parent event, or NULL */
  int rank;
  union {
    struct {
      uint64_t seqNumber; /* per communicator and collective type; equal on every rank */
      const char* func;   /* collective name, e.g. "AllReduce" */
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels; /* what NCCL scheduled, after the tuner */
      uint8_t nWarps;
      const char* algo;  /* algorithm name, e.g. "Ring" */
      const char* proto; /* protocol name, e.g. "Simple" */
      void* parentGroup;
    } coll;

    struct {
      uint8_t channelId;
      uint64_t pTimer; /* GPU globaltimer (ns) when the channel started */
    } kernelCh;
  };
} ncclProfilerEventDescr_v5_t;

/* What NCCL passes with a state transition, reduced likewise to the KernelCh member. */
typedef union {
  struct {
    uint64_t pTimer; /* GPU globaltimer (ns) when the channel stopped */
  } kernelCh;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name;

  /* Once per communicator. Returning an error disables the profiler for it. */
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);

  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

/* NCCL's offsets on LP64 targets (x86-64, aarch64). */
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, rank) == 16, "rank");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.seqNumber) == 24,
                         "coll.seqNumber");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.func) == 32, "coll.func");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.count) == 56, "coll.count");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.nChannels) == 80,
                         "coll.nChannels");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.nWarps) == 81, "coll.nWarps");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.algo) == 88, "coll.algo");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, coll.proto) == 96, "coll.proto");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.channelId) == 24,
                         "kernelCh.channelId");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.pTimer) == 32,
                         "kernelCh.pTimer");
DYNAMICCL_NCCL_ABI_CHECK(offsetof(ncclProfilerEventStateArgs_v5_t, kernelCh.pTimer) == 0,
                         "kernelCh.pTimer");

#endif /* DYNAMICCL_NCCL_ABI_PROFILER_V5_H_ */
