/*
 * Tuner plugin ABI v5, exported as ncclTunerPlugin_v5 and used by NCCL 2.28 and 2.29.
 *
 * init gains the communicator id (NCCL's commHash: the same on every rank), the NVLink
 * domain shape and NCCL's cost-model constants, which the plugin may edit before NCCL
 * builds the communicator's cost model from them. getCollInfo is v4's; finalize replaces
 * destroy.
 */
#ifndef DYNAMICCL_NCCL_ABI_TUNER_V5_H_
#define DYNAMICCL_NCCL_ABI_TUNER_V5_H_

#include "nccl_common.h"

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* Dimensions of the v5 constants, fixed by this ABI version. */
#define NCCL_NUM_ALGORITHMS_V5 7
#define NCCL_NUM_PROTOCOLS_V5 3
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_COMPCAPS_V5 4
#define NCCL_NUM_TUNING_SCALES_V5 3

/* Indices into those dimensions (besides the NCCL_ALGO_* / NCCL_PROTO_* ids). */
#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2 /* three nodes or more */

/* Latencies in microseconds, bandwidths in GB/s. */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

DYNAMICCL_NCCL_ABI_CHECK(sizeof(ncclTunerConstants_v5_t) == (7 * 3 + 3 * 7 * 3 + 5 * 4 * 3) * 8,
                         "ncclTunerConstants_v5_t is 144 doubles with no padding");

typedef struct {
  const char* name;

  /* nvlDomainInfo is read-only; constants is in/out. */
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);

  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);

  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

#endif /* DYNAMICCL_NCCL_ABI_TUNER_V5_H_ */
