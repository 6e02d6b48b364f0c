// One Work standing for several (a coalescing window on an engine without native coalescing,
// a batch an engine runs call by call): done when every member is, its future the members'
// outputs. Used by the backend and by engines alike, so that no engine includes the backend.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace dynamiccl {

class CoalescedWork : public c10d::Work {
 public:
  CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

}  // namespace dynamiccl
