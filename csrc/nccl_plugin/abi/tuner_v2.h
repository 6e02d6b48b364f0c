/*
 * Tuner plugin ABI v2, exported as ncclTunerPlugin_v2 and used by NCCL 2.21 (NCCL 2.22
 * and later still fall back to it).
 *
 * getCollInfo writes the algorithm and protocol directly; NCCL pre-sets them to
 * NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF and *nChannels to 0, meaning "NCCL decides", and does
 * not check that a written pair is available on the communicator.
 */
#ifndef DYNAMICCL_NCCL_ABI_TUNER_V2_H_
#define DYNAMICCL_NCCL_ABI_TUNER_V2_H_

#include "nccl_common.h"

typedef struct {
  const char* name;

  /* Once per communicator; *context is handed back to every other call for it. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);

  /* collNetSupport / nvlsSupport: whether CollNet / NVLS can run this collective type.
   * numPipeOps: how many collectives of the group this call stands for. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);

  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

#endif /* DYNAMICCL_NCCL_ABI_TUNER_V2_H_ */
