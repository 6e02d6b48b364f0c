// Learner contexts shared by the core tests.
#pragma once

#include <cstdint>

#include "core/types.h"

namespace dynamiccl {

// A data-parallel bucket of `bytes` on 4 ranks that overlaps compute (DDP's buckets but the last).
inline CollectiveContext overlapped_bucket(uint64_t bytes) {
  CollectiveContext ctx;
  ctx.effective_bytes = bytes;
  ctx.group_size = 4;
  ctx.role = Role::kDataParallel;
  ctx.exposure = Exposure::kOverlapped;
  return ctx;
}

}  // namespace dynamiccl
