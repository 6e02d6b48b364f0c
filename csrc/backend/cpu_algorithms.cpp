// Entry points of the CPU schedules: argument checks, the trivial cases every algorithm shares
// (one rank, empty tensors), and dispatch to the schedule files. Also the point-to-point
// channel and the reductions the schedules are built on.
#include "backend/cpu_algorithms.h"

#include <c10/util/Exception.h>

#include <initializer_list>
#include <string>

#include "backend/cpu_algo_detail.h"

namespace dynamiccl {

using cpu_detail::RedOp;

namespace {

// The inner engine takes a non-negative int tag (ProcessGroupGloo rejects negative ones).
int wire_tag(uint32_t tag) { return static_cast<int>(tag & 0x7fffffffu); }

const char* red_op_name(RedOp op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

void check_reduce_op(RedOp op, const at::Tensor& t) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX: return;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/true),
                  "dynamiccl CPU schedules: ReduceOp.", red_op_name(op),
                  " needs an integral dtype, got ", t.scalar_type());
      return;
    default:
      TORCH_CHECK(false, "dynamiccl CPU schedules: ReduceOp.", red_op_name(op),
                  " must be rewritten by the backend before it reaches a schedule");
  }
}

void check_tensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "dynamiccl CPU schedules: ", what, " must be a CPU tensor");
  TORCH_CHECK(t.is_contiguous(), "dynamiccl CPU schedules: ", what, " must be contiguous");
  TORCH_CHECK(!t.is_sparse(), "dynamiccl CPU schedules: ", what, " must be dense");
}

// Which algorithms each op has; the arm catalog offers only these.
void check_algo(const char* op, CpuAlgo algo, std::initializer_list<CpuAlgo> valid) {
  for (CpuAlgo a : valid) {
    if (a == algo) return;
  }
  std::string names;
  for (CpuAlgo a : valid) names += std::string(names.empty() ? "" : ", ") + cpu_algo_name(a);
  C10_THROW_ERROR(ValueError, std::string("dynamiccl CPU schedules: ") + op + " has no '" +
                                  cpu_algo_name(algo) + "' algorithm (valid: " + names + ")");
}

// Runs one schedule, turning failures (a peer that died or timed out) into DistBackendError
// that names the collective and the algorithm.
template <typename F>
void run_schedule(const char* op, CpuAlgo algo, int segments, F&& f) {
  try {
    f();
  } catch (const c10::DistBackendError&) {
    throw;
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistBackendError,
                    std::string("dynamiccl CPU ") + op + " (" + cpu_algo_name(algo) +
                        ", segments=" + std::to_string(segments) + ") failed: " + e.what());
  }
}

}  // namespace

// ---- P2PChannel ---------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> P2PChannel::isend(at::Tensor& t, int dst, uint32_t tag) {
  std::vector<at::Tensor> v{t};
  return pg_->send(v, dst, wire_tag(tag));
}

c10::intrusive_ptr<c10d::Work> P2PChannel::irecv(at::Tensor& t, int src, uint32_t tag) {
  std::vector<at::Tensor> v{t};
  return pg_->recv(v, src, wire_tag(tag));
}

void P2PChannel::wait(const c10::intrusive_ptr<c10d::Work>& w) {
  if (!w) return;
  // Work::wait rethrows the inner engine's error, including its timeout.
  const bool done = w->wait(timeout_);
  TORCH_CHECK(done, "dynamiccl P2P: transfer was aborted");
}

void P2PChannel::sendrecv(at::Tensor& send, int dst, at::Tensor& recv, int src, uint32_t tag) {
  auto r = recv.numel() > 0 ? irecv(recv, src, tag) : c10::intrusive_ptr<c10d::Work>();
  auto s = send.numel() > 0 ? isend(send, dst, tag) : c10::intrusive_ptr<c10d::Work>();
  wait(s);
  wait(r);
}

// ---- reductions -----------------------------------------------------------------------------

void cpu_detail::reduce_ordered(at::Tensor& out, const at::Tensor& first, const at::Tensor& second,
                                RedOp op) {
  switch (op) {
    case c10d::ReduceOp::SUM: at::add_out(out, first, second); return;
    case c10d::ReduceOp::PRODUCT: at::mul_out(out, first, second); return;
    case c10d::ReduceOp::MIN: at::minimum_out(out, first, second); return;
    case c10d::ReduceOp::MAX: at::maximum_out(out, first, second); return;
    case c10d::ReduceOp::BAND: at::bitwise_and_out(out, first, second); return;
    case c10d::ReduceOp::BOR: at::bitwise_or_out(out, first, second); return;
    case c10d::ReduceOp::BXOR: at::bitwise_xor_out(out, first, second); return;
    default: TORCH_CHECK(false, "dynamiccl CPU schedules: unsupported ReduceOp.", red_op_name(op));
  }
}

void reduce_into(at::Tensor& acc, const at::Tensor& other, c10d::ReduceOp::RedOpType op) {
  cpu_detail::reduce_ordered(acc, acc, other, op);
}

// ---- shared bookkeeping ---------------------------------------------------------------------

int cpu_detail::Transfers::send(at::Tensor t, int dst, uint32_t tag) {
  if (t.numel() == 0) return -1;
  tensors_.push_back(std::move(t));
  works_.push_back(ch_.isend(tensors_.back(), dst, tag));
  return static_cast<int>(works_.size()) - 1;
}

int cpu_detail::Transfers::recv(at::Tensor t, int src, uint32_t tag) {
  if (t.numel() == 0) return -1;
  tensors_.push_back(std::move(t));
  works_.push_back(ch_.irecv(tensors_.back(), src, tag));
  return static_cast<int>(works_.size()) - 1;
}

void cpu_detail::Transfers::wait(int i) {
  if (i < 0) return;
  auto& w = works_[static_cast<size_t>(i)];
  if (!w) return;
  ch_.wait(w);
  w.reset();
}

void cpu_detail::Transfers::wait_all() {
  for (size_t i = 0; i < works_.size(); ++i) wait(static_cast<int>(i));
}

cpu_detail::Fold::Fold(int size) {
  while (p2 * 2 <= size) {
    p2 *= 2;
    ++log2p;
  }
  extra = size - p2;
}

// ---- entry points ---------------------------------------------------------------------------

const char* cpu_algo_name(CpuAlgo algo) {
  switch (algo) {
    case CpuAlgo::kNative: return "native";
    case CpuAlgo::kRing: return "ring";
    case CpuAlgo::kRecursiveDoubling: return "rd";
    case CpuAlgo::kTree: return "tree";
    case CpuAlgo::kHalvingDoubling: return "hd";
  }
  return "unknown";
}

void cpu_allreduce(CpuAlgo algo, int segments, P2PChannel& ch, at::Tensor& tensor,
                   c10d::ReduceOp::RedOpType op, uint32_t tag) {
  check_tensor(tensor, "allreduce tensor");
  check_reduce_op(op, tensor);
  check_algo(
      "allreduce", algo,
      {CpuAlgo::kRing, CpuAlgo::kRecursiveDoubling, CpuAlgo::kHalvingDoubling, CpuAlgo::kTree});
  if (ch.size() == 1 || tensor.numel() == 0) return;
  at::Tensor x = tensor.view(-1);
  const int s = cpu_detail::effective_segments(segments, x.numel());
  run_schedule("allreduce", algo, s, [&] {
    switch (algo) {
      case CpuAlgo::kRing: cpu_detail::ring_allreduce(ch, x, op, s, tag); break;
      case CpuAlgo::kRecursiveDoubling: cpu_detail::rd_allreduce(ch, x, op, s, tag); break;
      case CpuAlgo::kHalvingDoubling: cpu_detail::hd_allreduce(ch, x, op, s, tag); break;
      default: cpu_detail::tree_allreduce(ch, x, op, s, tag); break;
    }
  });
}

void cpu_allgather(CpuAlgo algo, int segments, P2PChannel& ch, const at::Tensor& input,
                   at::Tensor& output_flat, uint32_t tag) {
  check_tensor(input, "allgather input");
  check_tensor(output_flat, "allgather output");
  TORCH_CHECK(output_flat.scalar_type() == input.scalar_type(),
              "dynamiccl CPU allgather: output dtype ", output_flat.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output_flat.numel() == input.numel() * ch.size(),
              "dynamiccl CPU allgather: output has ", output_flat.numel(),
              " elements, expected input numel ", input.numel(), " x group size ", ch.size());
  check_algo("allgather", algo, {CpuAlgo::kRing, CpuAlgo::kRecursiveDoubling});
  at::Tensor in = input.view(-1);
  at::Tensor out = output_flat.view(-1);
  if (ch.size() == 1 || in.numel() == 0) {
    out.copy_(in);
    return;
  }
  const int s = cpu_detail::effective_segments(segments, in.numel());
  run_schedule("allgather", algo, s, [&] {
    if (algo == CpuAlgo::kRing) {
      cpu_detail::ring_allgather(ch, in, out, s, tag);
    } else {
      cpu_detail::rd_allgather(ch, in, out, s, tag);
    }
  });
}

void cpu_reduce_scatter(CpuAlgo algo, int segments, P2PChannel& ch, const at::Tensor& input_flat,
                        at::Tensor& output, c10d::ReduceOp::RedOpType op, uint32_t tag) {
  check_tensor(input_flat, "reduce_scatter input");
  check_tensor(output, "reduce_scatter output");
  check_reduce_op(op, input_flat);
  TORCH_CHECK(output.scalar_type() == input_flat.scalar_type(),
              "dynamiccl CPU reduce_scatter: output dtype ", output.scalar_type(),
              " differs from input dtype ", input_flat.scalar_type());
  TORCH_CHECK(input_flat.numel() == output.numel() * ch.size(),
              "dynamiccl CPU reduce_scatter: input has ", input_flat.numel(),
              " elements, expected output numel ", output.numel(), " x group size ", ch.size());
  check_algo("reduce_scatter", algo, {CpuAlgo::kRing, CpuAlgo::kRecursiveDoubling});
  at::Tensor in = input_flat.view(-1);
  at::Tensor out = output.view(-1);
  if (ch.size() == 1 || out.numel() == 0) {
    out.copy_(in);
    return;
  }
  const int s = cpu_detail::effective_segments(segments, out.numel());
  run_schedule("reduce_scatter", algo, s, [&] {
    if (algo == CpuAlgo::kRing) {
      cpu_detail::ring_reduce_scatter(ch, in, out, op, s, tag);
    } else {
      cpu_detail::rh_reduce_scatter(ch, in, out, op, s, tag);
    }
  });
}

void cpu_broadcast(CpuAlgo algo, int segments, P2PChannel& ch, at::Tensor& tensor, int root,
                   uint32_t tag) {
  check_tensor(tensor, "broadcast tensor");
  TORCH_CHECK(root >= 0 && root < ch.size(), "dynamiccl CPU broadcast: root ", root,
              " is outside the group of ", ch.size());
  check_algo("broadcast", algo, {CpuAlgo::kTree, CpuAlgo::kRing});
  if (ch.size() == 1 || tensor.numel() == 0) return;
  at::Tensor x = tensor.view(-1);
  const int s = cpu_detail::effective_segments(segments, x.numel());
  run_schedule("broadcast", algo, s, [&] {
    if (algo == CpuAlgo::kTree) {
      cpu_detail::tree_broadcast(ch, x, root, s, tag);
    } else {
      cpu_detail::chain_broadcast(ch, x, root, s, tag);
    }
  });
}

void cpu_reduce(CpuAlgo algo, int segments, P2PChannel& ch, at::Tensor& tensor, int root,
                c10d::ReduceOp::RedOpType op, uint32_t tag) {
  check_tensor(tensor, "reduce tensor");
  check_reduce_op(op, tensor);
  TORCH_CHECK(root >= 0 && root < ch.size(), "dynamiccl CPU reduce: root ", root,
              " is outside the group of ", ch.size());
  check_algo("reduce", algo, {CpuAlgo::kTree, CpuAlgo::kRing});
  if (ch.size() == 1 || tensor.numel() == 0) return;
  at::Tensor x = tensor.view(-1);
  const int s = cpu_detail::effective_segments(segments, x.numel());
  run_schedule("reduce", algo, s, [&] {
    if (algo == CpuAlgo::kTree) {
      cpu_detail::tree_reduce(ch, x, root, op, s, tag);
    } else {
      cpu_detail::chain_reduce(ch, x, root, op, s, tag);
    }
  });
}

}  // namespace dynamiccl
