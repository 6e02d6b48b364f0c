#include "backend/dynamic_work.h"

#include <ATen/core/ivalue.h>

namespace dynamiccl {

DynamicWork::DynamicWork(int rank, c10d::OpType type, const char* profiling_title,
                         c10::intrusive_ptr<c10d::Work> inner,
                         c10::intrusive_ptr<c10::ivalue::Future> future,
                         std::vector<at::Tensor> outputs)
    : Work(rank, type, profiling_title),
      inner_(std::move(inner)),
      future_(std::move(future)),
      outputs_(std::move(outputs)) {
  // The profiler's async range (opened by Work's constructor) ends when the op completes, not
  // when someone waits: register only when profiling is on, to keep the common path lean.
  if (recordFunctionEndCallback_) {
    profiling_ = std::make_shared<ProfilingRange>();
    profiling_->end = std::move(recordFunctionEndCallback_);
    recordFunctionEndCallback_ = nullptr;
    if (future_) {  // else wait() ends it
      future_->addCallback([range = profiling_](c10::ivalue::Future&) { range->close(); });
    }
  }
}

bool DynamicWork::isCompleted() {
  if (inner_ && !inner_->isCompleted()) return false;
  return !future_ || future_->completed();
}

bool DynamicWork::isSuccess() const {
  if (inner_ && !inner_->isSuccess()) return false;
  return !future_ || !future_->completed() || !future_->hasError();
}

std::exception_ptr DynamicWork::exception() const {
  if (inner_) {
    if (auto e = inner_->exception()) return e;
  }
  if (future_ && future_->completed() && future_->hasError()) return future_->exception_ptr();
  return nullptr;
}

int DynamicWork::sourceRank() const { return inner_ ? inner_->sourceRank() : -1; }

std::vector<at::Tensor> DynamicWork::result() { return outputs_; }

void DynamicWork::synchronize() {
  if (inner_) inner_->synchronize();
}

bool DynamicWork::wait(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(wait_mu_);
  if (waited_ && (!inner_ || inner_->isCompleted())) {
    // Already waited: CUDA still needs this caller's stream ordered after the op.
    if (inner_) inner_->synchronize();
    return true;
  }
  // The inner work applies the engine's semantics: Gloo blocks the host; ProcessGroupNCCL makes
  // the caller's current stream wait without blocking the host. Both throw on error/timeout.
  if (inner_) inner_->wait(timeout);
  if (on_wait) {
    auto done = std::move(on_wait);
    on_wait = nullptr;
    done(*this);
  }
  if (future_) {
    // Ours (a schedule run by our worker, AVG rescaling) or the engine's own (complete once the
    // inner work is). Schedules bound every receive by the group timeout, so this wait ends.
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  }
  if (profiling_) profiling_->close();
  waited_ = true;
  return true;
}

void DynamicWork::abort() {
  if (inner_) inner_->abort();
}

c10::intrusive_ptr<c10::ivalue::Future> DynamicWork::getFuture() {
  return future_ ? future_ : inner_->getFuture();
}

float DynamicWork::getDuration() const { return inner_ ? inner_->getDuration() : -1.f; }

}  // namespace dynamiccl
