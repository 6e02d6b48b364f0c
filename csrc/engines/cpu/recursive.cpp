// Recursive schedules over the butterfly of the largest power of two p2 <= size (Fold in
// schedule_util.h folds the remaining ranks in before and out after):
//   rd all-reduce: log2(p2) full-vector exchanges (latency-optimal);
//   hd all-reduce: recursive-halving reduce-scatter then recursive-doubling all-gather
//                  (2 log2(p2) steps, bandwidth-optimal);
//   rd all-gather and rh reduce-scatter: the halves of hd on their own.
// Partners combine the lower virtual rank's data first, so both compute the same bits.
// `segments` splits each exchange into pieces; a received piece is reduced while the next is
// in flight, and in rd all-reduce a piece moves on to the next partner as soon as it is done.
#include <vector>

#include "engines/cpu/schedule_util.h"

namespace dynamiccl {
namespace cpu_detail {
namespace {

// acc (op)= the pieces received from `peer` into buf, in the order that puts the lower rank's
// data first.
void recv_reduce(Transfers& t, int peer, const at::Tensor& acc, const at::Tensor& buf,
                 bool mine_first, RedOp op, int segs, uint32_t tag) {
  std::vector<int> ids = recv_pieces(t, buf, peer, segs, tag);
  for (int j = 0; j < segs; ++j) {
    t.wait(ids[static_cast<size_t>(j)]);
    at::Tensor a = piece(acc, segs, j);
    if (a.numel() == 0) continue;
    at::Tensor b = piece(buf, segs, j);
    if (mine_first) {
      reduce_ordered(a, a, b, op);
    } else {
      reduce_ordered(a, b, a, op);
    }
  }
}

// The even rank of a folded pair: hand `mine` to its odd partner, then receive `result` back.
// The send is waited first because `result` may overlap `mine`.
void fold_out_rank(Transfers& t, int partner, const at::Tensor& mine, const at::Tensor& result,
                   int segs, uint32_t tag) {
  send_pieces(t, mine, partner, segs, tag);
  t.wait_all();
  recv_pieces(t, result, partner, segs, tag);
  t.wait_all();
}

// Recursive halving over virtual blocks [0, p2): `range(lo, hi)` is the view of virtual blocks
// [lo, hi). At distance d the rank keeps the half of its current range on its side of d, sends
// the other half to its partner and reduces the partner's copy of the kept half into it.
// Afterwards virtual rank v holds virtual block v reduced over all ranks. `tmp` must hold the
// largest half (the first one).
template <typename Range>
void halving_reduce_scatter(Transfers& t, const Fold& f, int v, Range&& range, at::Tensor& tmp,
                            RedOp op, int segs, uint32_t tag) {
  int lo = 0;
  for (int d = f.p2 / 2; d >= 1; d /= 2) {
    const int pv = v ^ d;
    const int keep_lo = (v & d) ? lo + d : lo;
    const int give_lo = (v & d) ? lo : lo + d;
    at::Tensor keep = range(keep_lo, keep_lo + d);
    at::Tensor give = range(give_lo, give_lo + d);
    at::Tensor buf = tmp.narrow(0, 0, keep.numel());
    // Receives are posted before sends on both sides; the half given away is not touched
    // again in this phase, so its sends may still be in flight during the next steps.
    std::vector<int> ids = recv_pieces(t, buf, f.real(pv), segs, tag);
    send_pieces(t, give, f.real(pv), segs, tag);
    for (int j = 0; j < segs; ++j) {
      t.wait(ids[static_cast<size_t>(j)]);
      at::Tensor a = piece(keep, segs, j);
      if (a.numel() == 0) continue;
      at::Tensor b = piece(buf, segs, j);
      if (v < pv) {
        reduce_ordered(a, a, b, op);
      } else {
        reduce_ordered(a, b, a, op);
      }
    }
    lo = keep_lo;
  }
  t.wait_all();
}

// Recursive doubling gather over virtual blocks: virtual rank v starts with block v; at
// distance d partners swap the d blocks each has, received straight into place.
template <typename Range>
void doubling_allgather(Transfers& t, const Fold& f, int v, Range&& range, int segs, uint32_t tag) {
  for (int d = 1; d < f.p2; d *= 2) {
    const int pv = v ^ d;
    const int mine_lo = (v / d) * d;
    const int theirs_lo = (pv / d) * d;
    recv_pieces(t, range(theirs_lo, theirs_lo + d), f.real(pv), segs, tag);
    send_pieces(t, range(mine_lo, mine_lo + d), f.real(pv), segs, tag);
    // The next step sends what was just received.
    t.wait_all();
  }
}

void rd_allreduce(P2PChannel& ch, const at::Tensor& x, RedOp op, int segments, uint32_t tag) {
  const Fold f(ch.size());
  const int r = ch.rank();
  const int v = f.vrank(r);
  Transfers t(ch);
  if (v < 0) {
    fold_out_rank(t, r + 1, x, x, segments, tag);
    return;
  }
  const bool has_folded = r < 2 * f.extra;
  at::Tensor tmp[2] = {at::empty_like(x), at::empty_like(x)};
  if (has_folded) recv_reduce(t, r - 1, x, tmp[1], /*mine_first=*/false, op, segments, tag);

  const int steps = f.log2p;
  auto partner = [&](int s) { return f.real(v ^ (1 << s)); };
  std::vector<int> recv_ids[2];
  std::vector<int> send_ids(static_cast<size_t>(segments), -1);
  recv_ids[0] = recv_pieces(t, tmp[0], partner(0), segments, tag);
  for (int j = 0; j < segments; ++j) {
    send_ids[static_cast<size_t>(j)] = t.send(piece(x, segments, j), partner(0), tag);
  }
  for (int s = 0; s < steps; ++s) {
    // Buffer (s+1)%2 was last read at step s-1, which is complete.
    if (s + 1 < steps) {
      recv_ids[(s + 1) % 2] = recv_pieces(t, tmp[(s + 1) % 2], partner(s + 1), segments, tag);
    }
    const bool mine_first = v < (v ^ (1 << s));
    for (int j = 0; j < segments; ++j) {
      const auto jj = static_cast<size_t>(j);
      // Piece j of x is still being sent to this step's partner: it must leave before it is
      // overwritten with the combination.
      t.wait(send_ids[jj]);
      t.wait(recv_ids[s % 2][jj]);
      at::Tensor a = piece(x, segments, j);
      if (a.numel() == 0) continue;
      at::Tensor b = piece(tmp[s % 2], segments, j);
      if (mine_first) {
        reduce_ordered(a, a, b, op);
      } else {
        reduce_ordered(a, b, a, op);
      }
      if (s + 1 < steps) {
        send_ids[jj] = t.send(a, partner(s + 1), tag);
      } else if (has_folded) {
        t.send(a, r - 1, tag);
      }
    }
  }
  t.wait_all();
}

void hd_allreduce(P2PChannel& ch, const at::Tensor& x, RedOp op, int segments, uint32_t tag) {
  const Fold f(ch.size());
  const int r = ch.rank();
  const int v = f.vrank(r);
  Transfers t(ch);
  if (v < 0) {
    fold_out_rank(t, r + 1, x, x, segments, tag);
    return;
  }
  const bool has_folded = r < 2 * f.extra;
  at::Tensor tmp = at::empty_like(x);
  if (has_folded) recv_reduce(t, r - 1, x, tmp, /*mine_first=*/false, op, segments, tag);
  const Partition blocks(x.numel(), f.p2);
  auto range = [&](int lo, int hi) {
    return span(x, blocks.begin(lo), blocks.begin(hi) - blocks.begin(lo));
  };
  halving_reduce_scatter(t, f, v, range, tmp, op, segments, tag);
  doubling_allgather(t, f, v, range, segments, tag);
  if (has_folded) send_pieces(t, x, r - 1, segments, tag);
  t.wait_all();
}

void rd_allgather(P2PChannel& ch, const at::Tensor& in, const at::Tensor& out, int segments,
                  uint32_t tag) {
  const Fold f(ch.size());
  const int r = ch.rank();
  const int v = f.vrank(r);
  const int64_t n = in.numel();
  Transfers t(ch);
  if (v < 0) {
    fold_out_rank(t, r + 1, in, out, segments, tag);
    return;
  }
  at::Tensor own = span(out, r * n, n);
  if (own.data_ptr() != in.data_ptr()) own.copy_(in);
  const bool has_folded = r < 2 * f.extra;
  if (has_folded) {
    recv_pieces(t, span(out, (r - 1) * n, n), r - 1, segments, tag);
    t.wait_all();
  }
  auto range = [&](int lo, int hi) {
    return span(out, f.first_block(lo) * n, (f.first_block(hi) - f.first_block(lo)) * n);
  };
  doubling_allgather(t, f, v, range, segments, tag);
  if (has_folded) send_pieces(t, out, r - 1, segments, tag);
  t.wait_all();
}

void rh_reduce_scatter(P2PChannel& ch, const at::Tensor& in, const at::Tensor& out, RedOp op,
                       int segments, uint32_t tag) {
  const Fold f(ch.size());
  const int r = ch.rank();
  const int v = f.vrank(r);
  const int64_t n = out.numel();
  Transfers t(ch);
  if (v < 0) {
    fold_out_rank(t, r + 1, in, out, segments, tag);
    return;
  }
  at::Tensor work = in.clone();  // the caller's input stays intact
  at::Tensor tmp = at::empty_like(work);
  const bool has_folded = r < 2 * f.extra;
  if (has_folded) recv_reduce(t, r - 1, work, tmp, /*mine_first=*/false, op, segments, tag);
  auto range = [&](int lo, int hi) {
    return span(work, f.first_block(lo) * n, (f.first_block(hi) - f.first_block(lo)) * n);
  };
  halving_reduce_scatter(t, f, v, range, tmp, op, segments, tag);
  out.copy_(span(work, r * n, n));
  if (has_folded) send_pieces(t, span(work, (r - 1) * n, n), r - 1, segments, tag);
  t.wait_all();
}

// --- Priors -------------------------------------------------------------------------------

double rd_allreduce_us(const CostShape& g, double n, int s) {
  return fold_cost_us(g, n, n, s, true) +
         g.log2p * (step_latency_us(s) + n * kBetaUsPerByte + n * kGammaUsPerByte / s);
}
double hd_allreduce_us(const CostShape& g, double n, int s) {
  const double frac = 1.0 - 1.0 / g.p2;
  return fold_cost_us(g, n, n, s, true) + 2 * g.log2p * step_latency_us(s) +
         2 * frac * n * kBetaUsPerByte + frac * n * kGammaUsPerByte / s;
}
// Folding moves one block in and the whole buffer out (all-gather), or the whole buffer in and
// one block out (reduce-scatter).
double recursive_gather_us(const CostShape& g, double n, int s, bool reduce) {
  const double frac = 1.0 - 1.0 / g.p2;
  const double block = n / g.p;
  const double fold = reduce ? fold_cost_us(g, n, block, s, true)
                             : fold_cost_us(g, block, n, s, false);
  return fold + g.log2p * step_latency_us(s) + frac * n * kBetaUsPerByte +
         (reduce ? frac * n * kGammaUsPerByte / s : 0.0);
}
double rd_allgather_us(const CostShape& g, double n, int s) {
  return recursive_gather_us(g, n, s, false);
}
double rh_reduce_scatter_us(const CostShape& g, double n, int s) {
  return recursive_gather_us(g, n, s, true);
}

}  // namespace
}  // namespace cpu_detail

// "rd": latency-optimal; its reduce-scatter is recursive halving.
const CpuSchedule& recursive_doubling_schedule() {
  using namespace cpu_detail;
  static const CpuSchedule schedule{
      "rd",
      {{OpKind::kAllReduce,
        [](const ScheduleCall& c) { rd_allreduce(c.ch, c.out, c.op, c.segments, c.tag); },
        rd_allreduce_us,
        {1}},
       {OpKind::kAllGather,
        [](const ScheduleCall& c) { rd_allgather(c.ch, c.in, c.out, c.segments, c.tag); },
        rd_allgather_us,
        {1}},
       {OpKind::kReduceScatter,
        [](const ScheduleCall& c) {
          rh_reduce_scatter(c.ch, c.in, c.out, c.op, c.segments, c.tag);
        },
        rh_reduce_scatter_us,
        {1}}}};
  return schedule;
}

// "hd": bandwidth-optimal all-reduce.
const CpuSchedule& halving_doubling_schedule() {
  using namespace cpu_detail;
  static const CpuSchedule schedule{
      "hd",
      {{OpKind::kAllReduce,
        [](const ScheduleCall& c) { hd_allreduce(c.ch, c.out, c.op, c.segments, c.tag); },
        hd_allreduce_us,
        {1}}}};
  return schedule;
}

}  // namespace dynamiccl
