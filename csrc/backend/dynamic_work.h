// The Work objects the backend returns. They keep c10d's semantics on top of an inner engine's
// Work (or a future our CPU schedule worker completes): wait() orders the caller's current stream
// for CUDA (the inner ProcessGroupNCCL work does that) and blocks the host for CPU, getFuture()
// holds the output TensorList (DDP needs it), errors and timeouts surface from wait().
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/telemetry.h"

namespace dynamiccl {

class DynamicWork : public c10d::Work {
 public:
  // `inner`: the engine's Work, or null when `future` is completed by our schedule worker.
  // `future`: completes with the outputs; null only when the inner work has none (Gloo's
  // point-to-point): getFuture() then fails as the engine's would.
  DynamicWork(int rank, c10d::OpType type, const char* profiling_title,
              c10::intrusive_ptr<c10d::Work> inner, c10::intrusive_ptr<c10::ivalue::Future> future,
              std::vector<at::Tensor> outputs);

  // What the backend needs when the call completes (kept here so the completion callback
  // captures only this Work).
  CallTiming timing;
  // For inner works without a future: what would have been the completion callback runs once,
  // when wait() returns successfully.
  std::function<void(DynamicWork&)> on_wait;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  float getDuration() const override;

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // null: inner's own future
  std::vector<at::Tensor> outputs_;
  // The profiler's range ends once: on completion (any thread) or in wait(), whichever comes
  // first — and wait() does not return while another thread is still ending it (the caller may
  // leave the profiler right after).
  struct ProfilingRange {
    std::once_flag once;
    std::function<void()> end;
    void close() {
      std::call_once(once, [this] { end(); });
    }
  };
  std::shared_ptr<ProfilingRange> profiling_;
  // wait() may be called again, and from several threads; engines' works (Gloo p2p) may not
  // tolerate a second wait, so only the first one reaches the engine.
  std::mutex wait_mu_;
  bool waited_ = false;
};

}  // namespace dynamiccl
