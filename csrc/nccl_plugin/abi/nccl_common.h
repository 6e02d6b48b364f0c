/*
 * The vocabulary shared by NCCL's tuner and profiler plugin ABIs: result codes, the
 * logger NCCL hands to a plugin with its level and subsystem values, collective ids,
 * and the algorithm / protocol ids that index the tuner's cost table.
 *
 * Names and values are NCCL's (as of 2.28, unchanged in 2.29 and 2.30), so each entry
 * can be checked against NCCL's headers. Plain C; needs no NCCL header.
 */
#ifndef DYNAMICCL_NCCL_ABI_NCCL_COMMON_H_
#define DYNAMICCL_NCCL_ABI_NCCL_COMMON_H_

#include <stddef.h>
#include <stdint.h>

/* nccl.h declares the same enum; a program that needs both includes nccl.h first. */
#ifndef NCCL_H_
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;
#endif

/* NCCL_DEBUG=<level> prints the messages whose level is at or below it. */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/* NCCL_DEBUG_SUBSYS=<list> selects messages by these bits; only the ones used here. */
typedef enum { NCCL_INIT = 0x1, NCCL_TUNING = 0x40, NCCL_ALL = ~0 } ncclDebugLogSubSys;

/* printf-like; `file` is shown with TRACE messages, as NCCL shows its own function names. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/* Collective ids. The tuner only ever sees the first NCCL_NUM_FUNCTIONS of them; AlltoAll,
 * Scatter and Gather exist from NCCL 2.28 on (before, ncclNumFuncs is 8). */
#define NCCL_NUM_FUNCTIONS 5
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclNumFuncs = 11
} ncclFunc_t;

/* Row index of the cost table. PAT exists from NCCL 2.23 on: NCCL 2.22 passes 6 rows. */
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

/* Column index of the cost table. */
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

/* A cost-table entry NCCL does not offer for this call (unsupported, disabled, or not
 * applicable). NCCL never picks it, and does not re-check an entry a plugin lowered. */
#define NCCL_ALGO_PROTO_IGNORE -1.0

/* Not NCCL's: a compile-time check usable from C and C++, for the layout checks of these
 * headers. */
#ifdef __cplusplus
#define DYNAMICCL_NCCL_ABI_CHECK(condition, what) static_assert(condition, what)
#else
#define DYNAMICCL_NCCL_ABI_CHECK(condition, what) _Static_assert(condition, what)
#endif

#endif /* DYNAMICCL_NCCL_ABI_NCCL_COMMON_H_ */
