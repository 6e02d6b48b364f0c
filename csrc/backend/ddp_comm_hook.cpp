#include "backend/ddp_comm_hook.h"

#include <vector>

#include "backend/hint_scope.h"

namespace dynamiccl {

c10::intrusive_ptr<c10::ivalue::Future> BucketHintCommHook::runHook(c10d::GradBucket& bucket) {
  std::vector<at::Tensor> tensors = {bucket.getBufferRef()};
  tensors[0].div_(state_->getSize());  // before the sum, as DDP's own hook does (no overflow)
  Hint hint;
  hint.role = static_cast<int>(Role::kDataParallel);
  hint.bucket = static_cast<int>(bucket.getIndex());
  hint.is_last = bucket.isLast() ? 1 : 0;
  ScopedHint scope(hint);
  return state_->allreduce(tensors)->getFuture();
}

}  // namespace dynamiccl
