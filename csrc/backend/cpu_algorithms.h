// CPU collective schedules of our own (ring, recursive doubling/halving, binomial tree, each
// optionally segmented), built on an inner engine's point-to-point operations with reductions
// done by ATen ops. They give the learner real choices on CPU whose best answer depends on
// message size, rank count and the network — the CPU analogue of NCCL's algorithms/protocols.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dynamiccl {

// CpuAlgo values are what Action::algo holds for the CPU engine; -1 (Action default) = native.
enum class CpuAlgo : int8_t {
  kNative = -1,            // the inner engine's own collective (Gloo)
  kRing = 0,               // ring (reduce-scatter + all-gather for all-reduce)
  kRecursiveDoubling = 1,  // recursive doubling / halving-doubling (any rank count)
  kTree = 2,               // binomial tree (reduce + broadcast for all-reduce)
  kHalvingDoubling = 3,    // all-reduce only: recursive-halving reduce-scatter + doubling gather
};

// Blocking point-to-point on a dedicated inner engine. Every wait honours `timeout`, so a peer
// that never arrives becomes an exception, not a hang.
class P2PChannel {
 public:
  P2PChannel(c10::intrusive_ptr<c10d::Backend> pg, std::chrono::milliseconds timeout)
      : pg_(std::move(pg)), timeout_(timeout) {}
  int rank() const { return pg_->getRank(); }
  int size() const { return pg_->getSize(); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Non-blocking issue; wait on the returned Work (with timeout()).
  c10::intrusive_ptr<c10d::Work> isend(at::Tensor& t, int dst, uint32_t tag);
  c10::intrusive_ptr<c10d::Work> irecv(at::Tensor& t, int src, uint32_t tag);
  void wait(const c10::intrusive_ptr<c10d::Work>& w);
  // Blocking exchange with two peers (send to dst and receive from src concurrently).
  void sendrecv(at::Tensor& send, int dst, at::Tensor& recv, int src, uint32_t tag);

 private:
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::chrono::milliseconds timeout_;
};

// Reductions the schedules perform: the backend rewrites AVG (SUM, then divide) and
// PREMUL_SUM (scale, then SUM) before calling them.
void reduce_into(at::Tensor& acc, const at::Tensor& other, c10d::ReduceOp::RedOpType op);

// Each runs to completion on the calling thread. `tensor`/`input`/`output` are contiguous CPU
// tensors; flat outputs hold the per-rank pieces concatenated in rank order. `segments` >= 1
// splits large messages into that many pipelined pieces. `tag` is unique per call.
void cpu_allreduce(CpuAlgo algo, int segments, P2PChannel& ch, at::Tensor& tensor,
                   c10d::ReduceOp::RedOpType op, uint32_t tag);
void cpu_allgather(CpuAlgo algo, int segments, P2PChannel& ch, const at::Tensor& input,
                   at::Tensor& output_flat, uint32_t tag);
void cpu_reduce_scatter(CpuAlgo algo, int segments, P2PChannel& ch, const at::Tensor& input_flat,
                        at::Tensor& output, c10d::ReduceOp::RedOpType op, uint32_t tag);
void cpu_broadcast(CpuAlgo algo, int segments, P2PChannel& ch, at::Tensor& tensor, int root,
                   uint32_t tag);
void cpu_reduce(CpuAlgo algo, int segments, P2PChannel& ch, at::Tensor& tensor, int root,
                c10d::ReduceOp::RedOpType op, uint32_t tag);

// Which algorithms exist for an op (used to build the CPU engine's arm set).
const char* cpu_algo_name(CpuAlgo algo);  // "native", "ring", "rd", "tree", "hd"

}  // namespace dynamiccl
