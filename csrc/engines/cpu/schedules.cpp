// The registry of CPU schedules, and the entry point every schedule call goes through.
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

#include "engines/cpu/reduction.h"
#include "engines/cpu/schedule.h"

namespace dynamiccl {

const std::vector<const CpuSchedule*>& cpu_schedules() {
  // Arm order: a new schedule is one line here (plus its file).
  static const std::vector<const CpuSchedule*> all = {
      &ring_schedule(), &recursive_doubling_schedule(), &halving_doubling_schedule(),
      &tree_schedule(), &pairwise_schedule(),           &bruck_schedule(),
  };
  return all;
}

const CpuSchedule::Op* CpuSchedule::find(OpKind op) const {
  for (const Op& o : ops) {
    if (o.op == op) return &o;
  }
  return nullptr;
}

namespace {

void check_tensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.device().is_cpu() && t.is_contiguous() && !t.is_sparse(),
                    "dynamiccl CPU schedules: the ", what,
                    " must be a dense contiguous CPU "
                    "tensor");
}

void check_reduce_op(RedOp op, const at::Tensor& t) {
  switch (op) {
    case RedOp::SUM:
    case RedOp::PRODUCT:
    case RedOp::MIN:
    case RedOp::MAX: return;
    case RedOp::BAND:
    case RedOp::BOR:
    case RedOp::BXOR:
      TORCH_CHECK_VALUE(at::isIntegralType(t.scalar_type(), /*includeBool=*/true),
                        "dynamiccl CPU schedules: reduce op ", red_op_name(op),
                        " needs an integral dtype, got ", t.scalar_type());
      return;
    default:
      TORCH_CHECK(false, "dynamiccl CPU schedules: reduce op ", red_op_name(op),
                  " must be rewritten by the CPU engine before it reaches a schedule");
  }
}

// The two buffers of a gather/scatter-like call must be the group's multiple of each other.
void check_split(const at::Tensor& whole, const at::Tensor& part, int size, const char* op) {
  TORCH_CHECK_VALUE(whole.scalar_type() == part.scalar_type(), "dynamiccl CPU ", op,
                    ": dtypes differ (", whole.scalar_type(), " and ", part.scalar_type(), ")");
  TORCH_CHECK_VALUE(whole.numel() == part.numel() * size, "dynamiccl CPU ", op,
                    ": the full "
                    "buffer has ",
                    whole.numel(), " elements, expected ", part.numel(), " x ", size, " ranks");
}

}  // namespace

void execute_schedule(const CpuSchedule& schedule, OpKind op, ScheduleCall call) {
  const CpuSchedule::Op* entry = schedule.find(op);
  TORCH_CHECK_VALUE(entry != nullptr, "dynamiccl CPU schedules: '", schedule.name, "' has no ",
                    op_name(op));
  const int size = call.ch.size();
  check_tensor(call.out, "output");
  const at::Tensor* data = &call.out;  // what the call moves: decides "nothing to move"
  switch (op) {
    case OpKind::kAllGather:
      check_tensor(call.in, "input");
      check_split(call.out, call.in, size, "allgather");
      data = &call.in;
      break;
    case OpKind::kReduceScatter:
      check_tensor(call.in, "input");
      check_split(call.in, call.out, size, "reduce_scatter");
      break;
    case OpKind::kAllToAll:
      check_tensor(call.in, "input");
      TORCH_CHECK_VALUE(call.in.scalar_type() == call.out.scalar_type() &&
                            call.in.numel() == call.out.numel() && call.out.numel() % size == 0,
                        "dynamiccl CPU alltoall: input and output must have one dtype and the "
                        "same number of elements, a multiple of the ",
                        size, " ranks (got ", call.in.numel(), " and ", call.out.numel(), ")");
      break;
    case OpKind::kBroadcast:
    case OpKind::kReduce:
      TORCH_CHECK_VALUE(call.root >= 0 && call.root < size, "dynamiccl CPU ", op_name(op),
                        ": root ", call.root, " is outside the group of ", size);
      break;
    default: break;
  }
  const bool moves_only = op == OpKind::kAllGather || op == OpKind::kBroadcast ||
                          op == OpKind::kAllToAll;
  if (!moves_only) check_reduce_op(call.op, call.out);
  const bool gathers = op == OpKind::kAllGather || op == OpKind::kReduceScatter ||
                       op == OpKind::kAllToAll;
  if (size == 1 || data->numel() == 0) {
    if (gathers) call.out.copy_(call.in);
    return;
  }
  // No more pieces than elements; the element count is the same on every rank, so is the clamp.
  call.segments = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(call.segments, data->numel())));
  const std::string what = std::string("dynamiccl CPU ") + op_name(op) + " (" + schedule.name +
                           ", " + std::to_string(call.segments) + " segments)";
  try {
    entry->run(call);
  } catch (...) {
    rethrow_naming(what);  // the engine's error class (DistNetworkError...) reaches the user
  }
}

}  // namespace dynamiccl
