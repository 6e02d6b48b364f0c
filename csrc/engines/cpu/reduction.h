// How a reduction is carried out on the CPU engine. Gloo and our schedules implement SUM,
// PRODUCT, MIN, MAX and the bitwise ops; AVG and PREMUL_SUM run as SUM followed by a scaling of
// the result (1/n, or the factor), as Gloo users expect from NCCL's semantics.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

namespace dynamiccl {

using RedOp = c10d::ReduceOp::RedOpType;

const char* red_op_name(RedOp op);  // "SUM", "AVG", ...

struct Reduction {
  RedOp engine_op = RedOp::SUM;  // what the engine / our schedules are asked for
  double scale = 1.0;            // the result is multiplied by this afterwards (when != 1)
  bool divide = false;           // AVG: the result is divided by the group size
  bool rescales() const { return divide || scale != 1.0; }
};

// Checks that `op` applies to `t`'s dtype (errors name both and what is accepted) and plans it.
// `cpu`: the CPU engine (NCCL implements every op natively: the plan is the op itself).
Reduction plan_reduction(const c10d::ReduceOp& op, const at::Tensor& t, bool cpu);

// The scaling step of `plan` on `tensor` (a result of the group of `group_size` ranks).
void apply_scaling(const Reduction& plan, const at::Tensor& tensor, int group_size);

// apply_scaling's dtype check alone, touching no data: a reduce's non-root ranks hold no result,
// yet Gloo raises there too when the scaling cannot apply (AVG of an integer tensor).
void check_scaling(const Reduction& plan, c10::ScalarType dtype);

}  // namespace dynamiccl
