/*
 * Tuner plugin ABI v6, exported as ncclTunerPlugin_v6 and used by NCCL 2.30 and later:
 * v5 plus an optional getChunkSize (NULL keeps NCCL's chunk size).
 */
#ifndef DYNAMICCL_NCCL_ABI_TUNER_V6_H_
#define DYNAMICCL_NCCL_ABI_TUNER_V6_H_

#include "nccl_common.h"
#include "tuner_v5.h"

typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

typedef struct {
  const char* name;

  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);

  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);

  ncclResult_t (*finalize)(void* context);

  /* *chunkSize holds NCCL's choice for the (algo, proto, nChannels) NCCL settled on; a
   * rewritten value is clamped to the buffer size and rounded to the protocol's grain. */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

#endif /* DYNAMICCL_NCCL_ABI_TUNER_V6_H_ */
