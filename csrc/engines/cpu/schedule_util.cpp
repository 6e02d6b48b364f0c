#include "engines/cpu/schedule_util.h"

#include <c10/util/Exception.h>

#include "engines/cpu/reduction.h"

namespace dynamiccl {
namespace cpu_detail {

void reduce_ordered(at::Tensor& out, const at::Tensor& first, const at::Tensor& second, RedOp op) {
  switch (op) {
    case RedOp::SUM: at::add_out(out, first, second); return;
    case RedOp::PRODUCT: at::mul_out(out, first, second); return;
    case RedOp::MIN: at::minimum_out(out, first, second); return;
    case RedOp::MAX: at::maximum_out(out, first, second); return;
    case RedOp::BAND: at::bitwise_and_out(out, first, second); return;
    case RedOp::BOR: at::bitwise_or_out(out, first, second); return;
    case RedOp::BXOR: at::bitwise_xor_out(out, first, second); return;
    default: TORCH_CHECK(false, "dynamiccl CPU schedules: unsupported reduce op ", red_op_name(op));
  }
}

int Transfers::send(at::Tensor t, int dst, uint32_t tag) {
  if (t.numel() == 0) return -1;
  tensors_.push_back(std::move(t));
  works_.push_back(ch_.isend(tensors_.back(), dst, tag));
  return static_cast<int>(works_.size()) - 1;
}

int Transfers::recv(at::Tensor t, int src, uint32_t tag) {
  if (t.numel() == 0) return -1;
  tensors_.push_back(std::move(t));
  works_.push_back(ch_.irecv(tensors_.back(), src, tag));
  return static_cast<int>(works_.size()) - 1;
}

void Transfers::wait(int i) {
  if (i < 0) return;
  auto& w = works_[static_cast<size_t>(i)];
  if (!w) return;
  ch_.wait(w);
  w.reset();
}

void Transfers::wait_all() {
  for (size_t i = 0; i < works_.size(); ++i) wait(static_cast<int>(i));
}

Fold::Fold(int size) {
  while (p2 * 2 <= size) {
    p2 *= 2;
    ++log2p;
  }
  extra = size - p2;
}

}  // namespace cpu_detail
}  // namespace dynamiccl
