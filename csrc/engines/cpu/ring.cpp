// Ring schedules: all-reduce as reduce-scatter + all-gather around the ring, the standalone
// ring all-gather and reduce-scatter, and the pipelined chain (a ring cut open at the root)
// for broadcast and reduce. With `segments` > 1 every chunk moves as that many pieces, and a
// piece is forwarded as soon as it is ready here, so the reduction of one piece overlaps the
// transfer of the next and consecutive ring steps overlap.
#include <vector>

#include "engines/cpu/schedule_util.h"

namespace dynamiccl {
namespace cpu_detail {
namespace {

int mod(int a, int p) { return ((a % p) + p) % p; }

// Reduce-scatter around the ring over `chunks` (size() parts of x): at step k rank r sends chunk
// r-k-1 to the right and reduces chunk r-k-2 from the left, so after size()-1 steps it holds
// chunk r reduced over all ranks.
void ring_rs_phase(P2PChannel& ch, at::Tensor& x, const Partition& chunks, RedOp op, int segs,
                   uint32_t tag) {
  const int p = ch.size();
  const int r = ch.rank();
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  const int steps = p - 1;
  auto chunk = [&](int c) { return span(x, chunks.begin(c), chunks.size(c)); };
  // Two receive buffers: step k+1 lands in one while step k is reduced out of the other.
  at::Tensor tmp[2] = {at::empty({chunks.size(0)}, x.options()),
                       at::empty({chunks.size(0)}, x.options())};
  auto buffer = [&](int k) { return tmp[k % 2].narrow(0, 0, chunks.size(mod(r - k - 2, p))); };
  Transfers t(ch);
  std::vector<int> recv_ids[2];
  recv_ids[0] = recv_pieces(t, buffer(0), left, segs, tag);
  send_pieces(t, chunk(mod(r - 1, p)), right, segs, tag);
  for (int k = 0; k < steps; ++k) {
    if (k + 1 < steps) recv_ids[(k + 1) % 2] = recv_pieces(t, buffer(k + 1), left, segs, tag);
    at::Tensor mine = chunk(mod(r - k - 2, p));
    at::Tensor buf = buffer(k);
    for (int j = 0; j < segs; ++j) {
      t.wait(recv_ids[k % 2][static_cast<size_t>(j)]);
      at::Tensor acc = piece(mine, segs, j);
      if (acc.numel() == 0) continue;
      reduce_ordered(acc, piece(buf, segs, j), acc, op);
      // What was reduced at step k is what goes right at step k+1.
      if (k + 1 < steps) t.send(acc, right, tag);
    }
  }
  // The chunks sent from x are overwritten by the all-gather that usually follows.
  t.wait_all();
}

// All-gather around the ring: rank r holds chunk r; at step k it forwards chunk r-k and
// receives chunk r-k-1 straight into place, so all receives can be posted up front.
void ring_ag_phase(P2PChannel& ch, at::Tensor& x, const Partition& chunks, int segs, uint32_t tag) {
  const int p = ch.size();
  const int r = ch.rank();
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  const int steps = p - 1;
  auto chunk = [&](int c) { return span(x, chunks.begin(c), chunks.size(c)); };
  Transfers t(ch);
  std::vector<std::vector<int>> recv_ids;
  for (int k = 0; k < steps; ++k) {
    recv_ids.push_back(recv_pieces(t, chunk(mod(r - k - 1, p)), left, segs, tag));
  }
  send_pieces(t, chunk(r), right, segs, tag);
  for (int k = 0; k + 1 < steps; ++k) {
    at::Tensor got = chunk(mod(r - k - 1, p));
    for (int j = 0; j < segs; ++j) {
      t.wait(recv_ids[static_cast<size_t>(k)][static_cast<size_t>(j)]);
      t.send(piece(got, segs, j), right, tag);
    }
  }
  t.wait_all();
}

void copy_unless_same(at::Tensor dst, const at::Tensor& src) {
  if (dst.data_ptr() != src.data_ptr()) dst.copy_(src);
}

void allreduce(const ScheduleCall& c) {
  at::Tensor x = c.out;
  const Partition chunks(x.numel(), c.ch.size());
  ring_rs_phase(c.ch, x, chunks, c.op, c.segments, c.tag);
  ring_ag_phase(c.ch, x, chunks, c.segments, c.tag);
}

void allgather(const ScheduleCall& c) {
  const int64_t n = c.in.numel();
  at::Tensor out = c.out;
  copy_unless_same(span(out, c.ch.rank() * n, n), c.in);
  ring_ag_phase(c.ch, out, Partition(out.numel(), c.ch.size()), c.segments, c.tag);
}

void reduce_scatter(const ScheduleCall& c) {
  const int64_t n = c.out.numel();
  at::Tensor work = c.in.clone();  // the caller's input stays intact
  ring_rs_phase(c.ch, work, Partition(work.numel(), c.ch.size()), c.op, c.segments, c.tag);
  c.out.copy_(span(work, c.ch.rank() * n, n));
}

// Broadcast down the chain root, root+1, ...: each piece is forwarded as soon as it arrives,
// so for many pieces the time approaches one message time plus one piece per hop.
void chain_broadcast(const ScheduleCall& c) {
  P2PChannel& ch = c.ch;
  const at::Tensor& x = c.out;
  const int root = c.root, segments = c.segments;
  const uint32_t tag = c.tag;
  const int p = ch.size();
  const int vr = mod(ch.rank() - root, p);
  const int prev = mod(ch.rank() - 1, p);
  const int next = mod(ch.rank() + 1, p);
  const bool has_next = vr + 1 < p;
  Transfers t(ch);
  if (vr == 0) {
    send_pieces(t, x, next, segments, tag);
  } else {
    std::vector<int> ids = recv_pieces(t, x, prev, segments, tag);
    for (int j = 0; j < segments; ++j) {
      t.wait(ids[static_cast<size_t>(j)]);
      if (has_next) t.send(piece(x, segments, j), next, tag);
    }
  }
  t.wait_all();
}

// Reduce up the chain root+p-1 -> ... -> root: each rank combines its own data with the partial
// from the rank after it (its own first: the chain's order) and passes it on piece by piece.
// Ranks other than the root leave their tensor unchanged.
void chain_reduce(const ScheduleCall& c) {
  P2PChannel& ch = c.ch;
  at::Tensor x = c.out;
  const int root = c.root, segments = c.segments;
  const uint32_t tag = c.tag;
  const int p = ch.size();
  const int vr = mod(ch.rank() - root, p);
  const int prev = mod(ch.rank() - 1, p);
  const int next = mod(ch.rank() + 1, p);
  Transfers t(ch);
  if (vr == p - 1) {
    send_pieces(t, x, prev, segments, tag);
    t.wait_all();
    return;
  }
  at::Tensor tmp = at::empty_like(x);
  std::vector<int> ids = recv_pieces(t, tmp, next, segments, tag);
  at::Tensor& acc = vr == 0 ? x : tmp;
  for (int j = 0; j < segments; ++j) {
    t.wait(ids[static_cast<size_t>(j)]);
    at::Tensor a = piece(acc, segments, j);
    if (a.numel() == 0) continue;
    reduce_ordered(a, piece(x, segments, j), piece(tmp, segments, j), c.op);
    if (vr > 0) t.send(a, prev, tag);
  }
  t.wait_all();
}

// --- Priors -------------------------------------------------------------------------------
// The reduction of all but the last piece overlaps with transfers, hence gamma / s.

double allreduce_us(const CostShape& g, double n, int s) {
  const double frac = (g.p - 1.0) / g.p;
  return 2 * (g.p - 1) * step_latency_us(s) + 2 * frac * n * kBetaUsPerByte +
         frac * n * kGammaUsPerByte / s;
}
// All-gather / reduce-scatter on n bytes of full buffer.
double gather_us(const CostShape& g, double n, int s, bool reduce) {
  const double frac = (g.p - 1.0) / g.p;
  return (g.p - 1) * step_latency_us(s) + frac * n * kBetaUsPerByte +
         (reduce ? frac * n * kGammaUsPerByte / s : 0.0);
}
double allgather_us(const CostShape& g, double n, int s) { return gather_us(g, n, s, false); }
double reduce_scatter_us(const CostShape& g, double n, int s) { return gather_us(g, n, s, true); }
// Chain: every hop is a different link, so pieces pipeline for real.
double chain_us(const CostShape& g, double n, int s, bool reduce) {
  const double gamma = reduce ? kGammaUsPerByte : 0.0;
  return (g.p - 1 + s - 1) * (kAlphaUs + n / s * (kBetaUsPerByte + gamma));
}
double chain_broadcast_us(const CostShape& g, double n, int s) { return chain_us(g, n, s, false); }
double chain_reduce_us(const CostShape& g, double n, int s) { return chain_us(g, n, s, true); }

}  // namespace
}  // namespace cpu_detail

const CpuSchedule& ring_schedule() {
  using namespace cpu_detail;
  static const CpuSchedule schedule{
      "ring",
      {{OpKind::kAllReduce, allreduce, allreduce_us, {1, 4}},
       {OpKind::kAllGather, allgather, allgather_us, {1, 4}},
       {OpKind::kReduceScatter, reduce_scatter, reduce_scatter_us, {1, 4}},
       // A chain moves the whole message through every hop: only worth it when pipelined.
       {OpKind::kBroadcast, chain_broadcast, chain_broadcast_us, {8}},
       {OpKind::kReduce, chain_reduce, chain_reduce_us, {8}}}};
  return schedule;
}

}  // namespace dynamiccl
