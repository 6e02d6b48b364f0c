/*
 * libdynamiccl_nccl.so — public C API of the DynamICCL NCCL tuner/profiler plugin.
 *
 * The DynamICCL backend links against this library and calls the functions below
 * directly. NCCL loads the same file as its tuner plugin (NCCL_TUNER_PLUGIN=<absolute path
 * of the loaded .so>) and, optionally, as its profiler plugin (NCCL_PROFILER_PLUGIN=<same
 * path>); the dynamic loader hands NCCL the copy already in the process, so the backend and
 * NCCL share one decision channel. A copy loaded from another path would have its own state
 * and NCCL would never see the backend's decisions: dynamiccl_nccl_loaded_by_nccl() says
 * whether NCCL initialised the copy the caller uses.
 *
 * Decision channels (tuner). A channel belongs to one backend group and its communicator(s):
 *   1. the group opens a channel (dynamiccl_nccl_channel_open) and, while its engine may create
 *      the group's communicator, expects it (dynamiccl_nccl_expect_comm): the tuner's init for a
 *      communicator of that size binds it to the channel, whichever thread NCCL runs init on;
 *   2. right before issuing one NCCL collective, the group publishes the decision for that call
 *      on its channel (dynamiccl_nccl_publish);
 *   3. NCCL calls getCollInfo for the bound communicator, on the calling thread (blocking
 *      communicators) or on a thread of its own (non-blocking ones); the plugin checks that the
 *      call is the published one (collective type and byte count, and a lone, unmerged call)
 *      and then forces the algorithm/protocol and caps the channels; anything else leaves NCCL
 *      to decide as usual;
 *   4. NCCL's entry point returns only once the call is prepared (a non-blocking communicator's
 *      caller polls until it is), so afterwards dynamiccl_nccl_last_outcome() says what
 *      happened, and dynamiccl_nccl_clear() drops a decision that was not consumed.
 * A communicator created while no expectation stands (another library's), or while several of
 * its size stand on other threads, is bound to none: it abstains on every call.
 *
 * Matching rules (all inputs are identical on every rank, so every rank reaches the same
 * verdict for the same call):
 *   - coll_type must equal NCCL's collective type and nbytes NCCL's byte count, which is
 *     element size x the larger of the send/receive counts: for AllGather and
 *     ReduceScatter that is the full gathered buffer (nRanks x count x element size);
 *   - NCCL consults the tuner once per aggregate of a group (ncclGroupStart/End): tasks of
 *     one type are merged and the tuner sees their summed bytes, or numPipeOps > 1. Such
 *     calls never match; they abstain and count as `mismatched`, and the decision stays
 *     published (it may still match a later call in the same group) until it is consumed,
 *     replaced by the next publish, or cleared;
 *   - a matching call consumes the decision (one decision per collective). With the v2
 *     ABI (NCCL 2.21), NCCL asks twice about the same lone collective (once for the
 *     algorithm, once for channels), so there the decision answers every matching call,
 *     is counted once, and stays published until the next publish or clear.
 *
 * Forcing never goes beyond what NCCL offers: a requested algorithm/protocol whose cost
 * entry NCCL marked unavailable (-1: unsupported, disabled by NCCL_ALGO/NCCL_PROTO, not
 * applicable) is never written; the call abstains entirely and counts `unavailable`.
 * getCollInfo never returns an error to NCCL.
 *
 * Every getCollInfo call is reported in NCCL's log under the TUNING subsystem (collective,
 * bytes, the published request, the outcome): the first call of each outcome on a
 * communicator at INFO, the later ones at TRACE (NCCL_DEBUG=INFO or TRACE with
 * NCCL_DEBUG_SUBSYS=TUNING).
 */
#ifndef DYNAMICCL_NCCL_H_
#define DYNAMICCL_NCCL_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DYNAMICCL_NCCL_EXPORT __attribute__((visibility("default")))
#else
#define DYNAMICCL_NCCL_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* NCCL's collective types as the tuner sees them (ncclFunc_t; only these five reach it). */
#define DYNAMICCL_NCCL_COLL_BROADCAST 0
#define DYNAMICCL_NCCL_COLL_REDUCE 1
#define DYNAMICCL_NCCL_COLL_ALLGATHER 2
#define DYNAMICCL_NCCL_COLL_REDUCESCATTER 3
#define DYNAMICCL_NCCL_COLL_ALLREDUCE 4
#define DYNAMICCL_NCCL_NUM_COLLS 5

/* NCCL's algorithm ids (NCCL_ALGO_*). PAT exists from NCCL 2.23 on. -1 = leave to NCCL. */
#define DYNAMICCL_NCCL_ALGO_UNDEF (-1)
#define DYNAMICCL_NCCL_ALGO_TREE 0
#define DYNAMICCL_NCCL_ALGO_RING 1
#define DYNAMICCL_NCCL_ALGO_COLLNET_DIRECT 2
#define DYNAMICCL_NCCL_ALGO_COLLNET_CHAIN 3
#define DYNAMICCL_NCCL_ALGO_NVLS 4
#define DYNAMICCL_NCCL_ALGO_NVLS_TREE 5
#define DYNAMICCL_NCCL_ALGO_PAT 6
#define DYNAMICCL_NCCL_NUM_ALGOS 7

/* NCCL's protocol ids (NCCL_PROTO_*). -1 = leave to NCCL. */
#define DYNAMICCL_NCCL_PROTO_UNDEF (-1)
#define DYNAMICCL_NCCL_PROTO_LL 0
#define DYNAMICCL_NCCL_PROTO_LL128 1
#define DYNAMICCL_NCCL_PROTO_SIMPLE 2
#define DYNAMICCL_NCCL_NUM_PROTOS 3

/* NCCL never runs a collective on more channels than this (MAXCHANNELS). */
#define DYNAMICCL_NCCL_MAX_CHANNELS 64

/* Chunk sizes (NCCL >= 2.30, tuner ABI v6 getChunkSize). A protocol's step buffer with NCCL's
 * default buffer sizes, over its NCCL_STEPS (8) slots: LL 8x512x16 bytes, LL128 120x640x8
 * bytes, Simple 4 MiB / 8. The plugin hands NCCL a published chunk only when it is this value
 * divided by a power of two from 1 to DYNAMICCL_NCCL_CHUNK_MAX_DIVISOR, so that NCCL never
 * has to clamp or round it (it always fits one step and keeps the protocol's line grain). */
#define DYNAMICCL_NCCL_CHUNK_STEP_LL ((size_t)8 * 512 * 16)
#define DYNAMICCL_NCCL_CHUNK_STEP_LL128 ((size_t)120 * 640 * 8)
#define DYNAMICCL_NCCL_CHUNK_STEP_SIMPLE ((size_t)512 * 1024)
#define DYNAMICCL_NCCL_CHUNK_MAX_DIVISOR 64
/* The first NCCL release (NCCL_VERSION_CODE: major*10000 + minor*100 + patch) whose tuner ABI
 * (v6) lets a plugin set the chunk size. */
#define DYNAMICCL_NCCL_CHUNK_MIN_VERSION 23000

/* Outcome of the last getCollInfo call on a channel's communicator. */
enum dynamiccl_nccl_outcome {
  DYNAMICCL_NCCL_NOT_CALLED = 0,  /* no getCollInfo on the channel since the last publish */
  DYNAMICCL_NCCL_APPLIED = 1,     /* the published decision matched and was applied */
  DYNAMICCL_NCCL_ABSTAINED = 2,   /* nothing was published: NCCL decided */
  DYNAMICCL_NCCL_UNAVAILABLE = 3, /* matched, but NCCL does not offer the requested
                                     algorithm/protocol here: NCCL decided */
  DYNAMICCL_NCCL_MISMATCHED = 4   /* a decision was published but the call was another one
                                     (type, bytes, merged group): NCCL decided */
};

/* Opens a decision channel for one group: its id (> 0), or 0 when the process has 4095 open
 * (the group is then not tuned). */
DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_channel_open(void);
/* Closes it (the group is gone); communicators still bound to it abstain from then on. */
DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_channel_close(int channel);
/*
 * Every communicator of n_ranks ranks (0: any size) whose tuner NCCL initialises from now on is
 * bound to `channel`, until the expectation is withdrawn with n_ranks = (size_t)-1. Where
 * several expectations of that size stand, the one set on the initialising thread wins, else
 * none (the communicator stays unbound). Set it only while the group's engine may create its
 * communicator (its construction, its first collectives, a reconfigure).
 */
DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_expect_comm(int channel, size_t n_ranks);
/* How many communicators were bound to `channel` since it was opened. */
DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_comms_bound(int channel);

/*
 * Publishes the decision for the next collective the group issues on its channel.
 *   coll_type: DYNAMICCL_NCCL_COLL_*;  nbytes: the byte count NCCL will see (see above);
 *   algo / proto: DYNAMICCL_NCCL_ALGO_* / DYNAMICCL_NCCL_PROTO_*, or -1 to leave that part to
 *   NCCL (NCCL then picks the cheapest available entry among those that satisfy the other
 *   part); nchannels: upper bound on channels (1..64; larger values are clamped to 64) or -1.
 *   With NCCL >= 2.22 nchannels is a cap: NCCL may use fewer (it keeps >= 16 KiB per channel)
 *   and never more than the communicator has; with NCCL 2.21 it is the channel count.
 * A decision of -1/-1/-1 is honoured by changing nothing (it still counts as applied: the group
 * learns that its communicator is bound and consults the tuner).
 * Replaces any earlier decision of the channel and resets its outcome to NOT_CALLED.
 * Never blocks and never allocates. Same as dynamiccl_nccl_publish_chunk with chunk_bytes 0.
 */
DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_publish(int channel, int coll_type, size_t nbytes,
                                                  int algo, int proto, int nchannels);

/*
 * dynamiccl_nccl_publish plus a chunk size in bytes (0 = NCCL's own). With tuner ABI v6+
 * (NCCL >= 2.30) NCCL asks getChunkSize once it settled algorithm, protocol and channels; the
 * plugin then returns chunk_bytes when getCollInfo applied this decision, the call has the
 * decision's collective type and byte count, NCCL settled on the decision's algorithm/protocol
 * (where it named them), and chunk_bytes is valid for that protocol (dynamiccl_nccl_chunk_valid).
 * Otherwise NCCL's value is kept. Older NCCLs never ask: the chunk is then simply not applied
 * (the rest of the decision is).
 */
DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_publish_chunk(int channel, int coll_type, size_t nbytes,
                                                        int algo, int proto, int nchannels,
                                                        size_t chunk_bytes);

/* 1 when chunk_bytes is a chunk the plugin hands NCCL for protocol `proto`: the protocol's step
 * buffer (DYNAMICCL_NCCL_CHUNK_STEP_*) divided by 1, 2, 4, ... DYNAMICCL_NCCL_CHUNK_MAX_DIVISOR;
 * else 0 (also for an unknown protocol). Inline, so that code not linked with the plugin (the
 * arm catalog) applies the same rule. */
static inline int dynamiccl_nccl_chunk_valid(int proto, size_t chunk_bytes) {
  size_t step = 0, divisor;
  if (proto == DYNAMICCL_NCCL_PROTO_LL) step = DYNAMICCL_NCCL_CHUNK_STEP_LL;
  if (proto == DYNAMICCL_NCCL_PROTO_LL128) step = DYNAMICCL_NCCL_CHUNK_STEP_LL128;
  if (proto == DYNAMICCL_NCCL_PROTO_SIMPLE) step = DYNAMICCL_NCCL_CHUNK_STEP_SIMPLE;
  if (step == 0 || chunk_bytes == 0) return 0;
  for (divisor = 1; divisor <= DYNAMICCL_NCCL_CHUNK_MAX_DIVISOR; divisor *= 2) {
    if (chunk_bytes * divisor == step) return 1;
  }
  return 0;
}

/* Drops the channel's published decision, if any. The outcome is kept. */
DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_clear(int channel);

/* enum dynamiccl_nccl_outcome of the last getCollInfo on the channel's communicator. */
DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_last_outcome(int channel);

/*
 * The channels NCCL settled on for the channel's last collective, when it was of coll_type and
 * nbytes and ran since the last publish or clear: with tuner ABI v6+ (NCCL >= 2.30) NCCL tells
 * getChunkSize the channels of each channel-range piece of every collective, tuned or not; this
 * is the most of them. 0 when NCCL did not say (an older NCCL, another call).
 * The communicator's real channel count, which the tuner is otherwise never told.
 */
DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_last_channels(int channel, int coll_type, size_t nbytes);

/* Process-wide counters (relaxed atomics: each value is exact, the set is not a snapshot). */
struct dynamiccl_nccl_counters {
  uint64_t applied;             /* getCollInfo calls that applied a published decision */
  uint64_t abstained;           /* getCollInfo calls with no decision on their channel */
  uint64_t unavailable;         /* matching decisions NCCL could not honour (cost entry -1) */
  uint64_t mismatched;          /* calls that did not match the published decision */
  uint64_t init_calls;          /* tuner init calls (one per communicator NCCL created) */
  uint64_t active_comms;        /* communicators initialised and not yet destroyed/finalized */
  uint64_t abi_version;         /* the tuner ABI of the most recent init (2..6; 0 before any) */
  uint64_t chunk_size_calls;    /* v6 getChunkSize calls (NCCL >= 2.30) */
  uint64_t chunk_size_applied;  /* decisions whose chunk getChunkSize returned (once each) */
  uint64_t chunk_size_rejected; /* matching calls whose published chunk was not valid for the
                                   protocol NCCL settled on: NCCL's value was kept */
  uint64_t unbound_comms;       /* communicators initialised with no channel to bind to */
};
DYNAMICCL_NCCL_EXPORT void dynamiccl_nccl_get_counters(struct dynamiccl_nccl_counters* out);

/* 1 once NCCL called the tuner's init on this copy of the library, else 0. */
DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_loaded_by_nccl(void);

/*
 * Profiler (NCCL >= 2.28, ABI ncclProfiler_v5, enabled with NCCL_PROFILER_PLUGIN=<path>).
 * Every collective NCCL launches gets one record in a fixed-size, lock-free ring of
 * DYNAMICCL_NCCL_PROFILER_RING_SIZE entries shared by all communicators of the process; the
 * oldest records are overwritten. A record holds what NCCL actually ran (algorithm,
 * protocol, channels) and, as the GPU reports them, the kernel's start/stop times. Kernel
 * times arrive asynchronously (NCCL's proxy thread relays them after the kernel ran): a
 * record is final once kernel_channels_done >= nchannels; re-read it later until then.
 */
#define DYNAMICCL_NCCL_PROFILER_RING_SIZE 2048

struct dynamiccl_nccl_coll_record {
  uint64_t id;                  /* 1, 2, 3, ... in the order collectives were launched */
  uint64_t comm_id;             /* NCCL's commHash: the same on every rank of the communicator */
  uint64_t seq_number;          /* NCCL's per-communicator, per-collective-type sequence number */
  uint64_t count;               /* element count NCCL was given */
  uint64_t kernel_start_ns;     /* earliest channel start (GPU globaltimer, ns); 0 = not yet */
  uint64_t kernel_stop_ns;      /* latest channel stop (GPU globaltimer, ns); 0 = not yet */
  int32_t coll_type;            /* DYNAMICCL_NCCL_COLL_*, -1 if NCCL named another function */
  int32_t algo;                 /* DYNAMICCL_NCCL_ALGO_* NCCL ran, -1 if not recognised */
  int32_t proto;                /* DYNAMICCL_NCCL_PROTO_* NCCL ran, -1 if not recognised */
  int32_t nchannels;            /* channels NCCL scheduled for this collective */
  int32_t nwarps;               /* warps per channel */
  int32_t rank;                 /* this process's rank in the communicator */
  int32_t kernel_channels_done; /* channels whose kernel stop time has been received */
  int32_t reserved;
};

/*
 * Copies, oldest first, up to max_records records whose id is greater than after_id and
 * that are still in the ring. Returns how many were copied. Pass the id of the last record
 * seen to continue; records overwritten meanwhile are skipped. Never blocks.
 */
DYNAMICCL_NCCL_EXPORT size_t dynamiccl_nccl_profiler_read(uint64_t after_id,
                                                          struct dynamiccl_nccl_coll_record* out,
                                                          size_t max_records);

/* 1 once NCCL called the profiler's init on this copy of the library, else 0. */
DYNAMICCL_NCCL_EXPORT int dynamiccl_nccl_profiler_loaded_by_nccl(void);

#ifdef __cplusplus
}
#endif

#endif /* DYNAMICCL_NCCL_H_ */
