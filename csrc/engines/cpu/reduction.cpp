#include "engines/cpu/reduction.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace dynamiccl {

const char* red_op_name(RedOp op) {
  switch (op) {
    case RedOp::SUM: return "SUM";
    case RedOp::AVG: return "AVG";
    case RedOp::PRODUCT: return "PRODUCT";
    case RedOp::MIN: return "MIN";
    case RedOp::MAX: return "MAX";
    case RedOp::BAND: return "BAND";
    case RedOp::BOR: return "BOR";
    case RedOp::BXOR: return "BXOR";
    case RedOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

Reduction plan_reduction(const c10d::ReduceOp& op, const at::Tensor& t, bool cpu) {
  const RedOp r = op.op_;
  const auto dtype = t.scalar_type();
  if (r == RedOp::BAND || r == RedOp::BOR || r == RedOp::BXOR) {
    TORCH_CHECK_VALUE(at::isIntegralType(dtype, /*includeBool=*/true), "dynamiccl: reduce op ",
                      red_op_name(r), " is not supported for dtype ", dtype,
                      "; bitwise reductions accept integer and bool dtypes");
  }
  if (r == RedOp::PREMUL_SUM) {
    TORCH_CHECK_VALUE(at::isFloatingType(dtype),
                      "dynamiccl: reduce op PREMUL_SUM is not "
                      "supported for dtype ",
                      dtype, "; accepted: floating dtypes");
  }
  Reduction plan;
  plan.engine_op = r;
  if (!cpu) return plan;
  if (r == RedOp::AVG) {
    plan.engine_op = RedOp::SUM;
    plan.divide = true;
  } else if (r == RedOp::PREMUL_SUM) {
    plan.engine_op = RedOp::SUM;
    auto* supp = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK_VALUE(supp, "dynamiccl: PREMUL_SUM without its factor (make it with "
                            "torch.distributed._make_nccl_premul_sum)");
    plan.scale = supp->tensor_factor.defined() ? supp->tensor_factor.item<double>()
                                               : supp->double_factor;
  }
  return plan;
}

void apply_scaling(const Reduction& plan, const at::Tensor& tensor, int group_size) {
  // Communication buffers may require grad (DDP with create_graph): scale the data, untracked.
  at::Tensor t = tensor.detach();
  if (plan.divide) {
    t.div_(group_size);
  } else if (plan.scale != 1.0) {
    t.mul_(plan.scale);
  }
}

void check_scaling(const Reduction& plan, c10::ScalarType dtype) {
  if (plan.rescales()) apply_scaling(plan, at::empty({0}, at::TensorOptions().dtype(dtype)), 1);
}

}  // namespace dynamiccl
