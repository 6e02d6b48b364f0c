// A c10d engine that does nothing and finishes at once: what the backend adds on top of an engine
// can then be measured (benchmarks/cpp/backend_hot_path.cpp) and its bookkeeping tested without
// a network (tests/cpp/backend). Collectives leave their tensors as they are, which is the right
// answer on a single rank; the consensus all-reduce of a one-rank group is then exact.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

namespace dynamiccl {
namespace testing {

// A Work that is complete from the start, with a completed TensorList future.
class DoneWork : public c10d::Work {
 public:
  explicit DoneWork(std::vector<at::Tensor> out) : Work(0, c10d::OpType::ALLREDUCE) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    future_->markCompleted(c10::IValue(std::move(out)));
  }
  bool isCompleted() override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class NullEngine : public c10d::Backend {
 public:
  explicit NullEngine(int size = 1) : Backend(0, size) {}
  const std::string getBackendName() const override { return "null"; }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t,
                                           const c10d::AllreduceOptions&) override {
    ++allreduces;
    if (fail) fail();
    if (reduce) reduce(t);
    if (synchronous) return {};  // as ProcessGroupNCCL for async_op=False: ran on the stream
    if (reuse_work) {
      if (!done_) done_ = c10::make_intrusive<DoneWork>(t);
      return done_;  // the baseline costs no allocation
    }
    return c10::make_intrusive<DoneWork>(t);
  }

  int allreduces = 0;
  bool reuse_work = false;
  bool synchronous = false;                              // return no Work
  std::function<void()> fail;                            // throws the error the engine should raise
  std::function<void(std::vector<at::Tensor>&)> reduce;  // what the other ranks would add

 private:
  c10::intrusive_ptr<c10d::Work> done_;
};

}  // namespace testing
}  // namespace dynamiccl
