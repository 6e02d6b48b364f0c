// All-to-all schedules (equal splits: `in` and `out` are `size` blocks in rank order; block j of
// `in` goes to rank j, block j of `out` comes from rank j):
//   pairwise: size - 1 steps; at step k a rank sends to rank + k and receives from rank - k, so
//             every pair exchanges exactly once and each step moves one block each way
//             (bandwidth-optimal: what Gloo does, without its all-at-once posting);
//   bruck:    ceil(log2 size) steps; at step k a rank forwards every block whose (rotated) index
//             has bit k set to rank + k: about half the data per step, but only log steps
//             (latency-optimal: for small messages, the ep role's routing metadata).
#include <vector>

#include "engines/cpu/schedule_util.h"

namespace dynamiccl {
namespace cpu_detail {
namespace {

void pairwise_alltoall(const ScheduleCall& c) {
  const int n = c.ch.size(), r = c.ch.rank();
  const Partition blocks(c.out.numel(), n);
  auto block = [&](const at::Tensor& t, int j) { return span(t, blocks.begin(j), blocks.size(j)); };
  block(c.out, r).copy_(block(c.in, r));
  Transfers t(c.ch);
  for (int k = 1; k < n; ++k) {
    const int dst = (r + k) % n, src = (r - k + n) % n;
    t.send(block(c.in, dst), dst, c.tag);
    t.recv(block(c.out, src), src, c.tag);
    t.wait_all();  // one exchange in flight per step: no rank is flooded by all the others
  }
}

void bruck_alltoall(const ScheduleCall& c) {
  const int n = c.ch.size(), r = c.ch.rank();
  const int64_t blk = c.out.numel() / n;
  // Rotate so that block i is bound for rank r + i.
  at::Tensor work = at::empty({n, blk}, c.out.options());
  const at::Tensor in = c.in.view({n, blk});
  for (int i = 0; i < n; ++i) work[i].copy_(in[(r + i) % n]);
  for (int k = 1; k < n; k <<= 1) {
    std::vector<int64_t> moving;
    for (int i = 1; i < n; ++i) {
      if (i & k) moving.push_back(i);
    }
    const at::Tensor index = at::tensor(moving, at::kLong);
    at::Tensor outgoing = work.index_select(0, index).contiguous();
    at::Tensor incoming = at::empty_like(outgoing);
    Transfers t(c.ch);
    t.send(outgoing.view({-1}), (r + k) % n, c.tag);
    t.recv(incoming.view({-1}), (r - k + n) % n, c.tag);
    t.wait_all();
    work.index_copy_(0, index, incoming);
  }
  // Block i now holds what rank r - i sent to this rank.
  at::Tensor out = c.out.view({n, blk});
  for (int i = 0; i < n; ++i) out[(r - i + n) % n].copy_(work[i]);
}

// Expected costs on the engine's latency-bandwidth model; `bytes` is this rank's whole input.
double pairwise_us(const CostShape& g, double bytes, int) {
  return (g.p - 1) * (kAlphaUs + bytes / g.p * kBetaUsPerByte);
}

double bruck_us(const CostShape& g, double bytes, int) {
  return g.ceil_log2p * (kAlphaUs + bytes / 2 * kBetaUsPerByte) + bytes * kGammaUsPerByte;
}

}  // namespace
}  // namespace cpu_detail

const CpuSchedule& pairwise_schedule() {
  static const CpuSchedule schedule{
      "pairwise",
      {{OpKind::kAllToAll, cpu_detail::pairwise_alltoall, cpu_detail::pairwise_us, {1}}}};
  return schedule;
}

const CpuSchedule& bruck_schedule() {
  static const CpuSchedule schedule{
      "bruck", {{OpKind::kAllToAll, cpu_detail::bruck_alltoall, cpu_detail::bruck_us, {1}}}};
  return schedule;
}

}  // namespace dynamiccl
