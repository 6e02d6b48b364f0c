/*
 * Tuner plugin ABI v4, exported as ncclTunerPlugin_v4 and used by NCCL 2.24 to 2.27:
 * v3 plus regBuff.
 */
#ifndef DYNAMICCL_NCCL_ABI_TUNER_V4_H_
#define DYNAMICCL_NCCL_ABI_TUNER_V4_H_

#include "nccl_common.h"

typedef struct {
  const char* name;

  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);

  /* regBuff: 1 when this rank's user buffers are registered with the communicator (a
   * local fact, not necessarily the same on every rank). */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);

  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

#endif /* DYNAMICCL_NCCL_ABI_TUNER_V4_H_ */
