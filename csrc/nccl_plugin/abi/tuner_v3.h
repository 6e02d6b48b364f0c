/*
 * Tuner plugin ABI v3, exported as ncclTunerPlugin_v3 and used by NCCL 2.22 and 2.23.
 *
 * The algorithm/protocol outputs of v2 become an in/out cost table: NCCL fills
 * float[numAlgo][numProto], row-major and contiguous, with its predicted time per
 * (algorithm, protocol) and NCCL_ALGO_PROTO_IGNORE where it offers nothing, passes it cast
 * to float**, and after the call runs the cheapest non-negative entry.
 */
#ifndef DYNAMICCL_NCCL_ABI_TUNER_V3_H_
#define DYNAMICCL_NCCL_ABI_TUNER_V3_H_

#include "nccl_common.h"

typedef struct {
  const char* name;

  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);

  /* *nChannels: 0 on entry ("NCCL decides"); a positive value caps the channels. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);

  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

#endif /* DYNAMICCL_NCCL_ABI_TUNER_V3_H_ */
