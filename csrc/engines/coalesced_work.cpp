#include "engines/coalesced_work.h"

#include <ATen/core/ivalue.h>

namespace dynamiccl {

CoalescedWork::CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
    : Work(rank, c10d::OpType::COALESCED, "dynamiccl:coalesced"), works_(std::move(works)) {}

bool CoalescedWork::isCompleted() {
  for (auto& w : works_) {
    if (!w->isCompleted()) return false;
  }
  return true;
}

bool CoalescedWork::isSuccess() const {
  for (auto& w : works_) {
    if (!w->isSuccess()) return false;
  }
  return true;
}

std::exception_ptr CoalescedWork::exception() const {
  for (auto& w : works_) {
    if (auto e = w->exception()) return e;
  }
  return nullptr;
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  for (auto& w : works_) w->wait(timeout);
  return true;
}

void CoalescedWork::synchronize() {
  for (auto& w : works_) w->synchronize();
}

c10::intrusive_ptr<c10::ivalue::Future> CoalescedWork::getFuture() {
  // Completes when every member completes; value: every member's outputs, concatenated.
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(
      c10::FutureType::create(c10::ListType::create(c10::TensorType::get())));
  for (auto& w : works_) futures.push_back(w->getFuture());
  auto all = c10::collectAll(futures);
  return all->then(
      [](c10::ivalue::Future& f) -> c10::IValue {
        std::vector<at::Tensor> out;
        for (const auto& member : f.value().toList()) {
          auto fut = member.get().toFuture();
          if (fut->hasError()) std::rethrow_exception(fut->exception_ptr());
          if (fut->value().isTensorList()) {
            for (const auto& t : fut->value().toTensorVector()) out.push_back(t);
          }
        }
        return c10::IValue(out);
      },
      c10::ListType::create(c10::TensorType::get()));
}

}  // namespace dynamiccl
