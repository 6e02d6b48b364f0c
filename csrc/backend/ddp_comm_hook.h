// DDP's gradient-bucket all-reduce with the bucket's place in the step as the call's hint.
//
// Registered on DDP's reducer in place of its built-in all-reduce hook: the same arithmetic
// (divide by the group size, then sum) and the same Future, so DDP's semantics are unchanged.
// It runs on the autograd thread and never enters Python: a Python comm hook takes the GIL for
// every bucket twice (to run the hook, then to read its result) and costs a step on a CPU host
// more than the learner gains on small buckets (benchmarks/results/step_aware_cpu.md).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

namespace dynamiccl {

class BucketHintCommHook final
    : public c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>> {
 public:
  using CppCommHookInterface::CppCommHookInterface;
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
};

}  // namespace dynamiccl
