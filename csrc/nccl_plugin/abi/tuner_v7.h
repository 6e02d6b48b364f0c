/*
 * Tuner plugin ABI v7, exported as ncclTunerPlugin_v7 and loaded first by NCCL 2.32: v6's
 * callbacks unchanged; the model constants gain a fifth GPU generation (Rubin) in every
 * per-generation table. The NVLink-domain info is v5's.
 */
#ifndef DYNAMICCL_NCCL_ABI_TUNER_V7_H_
#define DYNAMICCL_NCCL_ABI_TUNER_V7_H_

#include "nccl_common.h"
#include "tuner_v6.h"

typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v7_t;

#define NCCL_NUM_COMPCAPS_V7 5
#define NCCL_RUBIN_COMPCAP_IDX 4

/* v5's layout with NCCL_NUM_COMPCAPS_V7 generations. */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v7_t;

DYNAMICCL_NCCL_ABI_CHECK(sizeof(ncclTunerConstants_v7_t) == (7 * 3 + 3 * 7 * 3 + 5 * 5 * 3) * 8,
                         "ncclTunerConstants_v7_t is 159 doubles with no padding");

typedef struct {
  const char* name;

  /* nvlDomainInfo is read-only; constants is in/out. */
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v7_t* nvlDomainInfo,
                       ncclTunerConstants_v7_t* constants);

  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);

  ncclResult_t (*finalize)(void* context);

  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v7_t;

#endif /* DYNAMICCL_NCCL_ABI_TUNER_V7_H_ */
