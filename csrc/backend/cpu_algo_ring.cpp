// Ring schedules: all-reduce as reduce-scatter + all-gather around the ring, the standalone
// ring all-gather and reduce-scatter, and the pipelined chain (a ring cut open at the root)
// for broadcast and reduce. With `segments` > 1 every chunk moves as that many pieces, and a
// piece is forwarded as soon as it is ready here, so the reduction of one piece overlaps the
// transfer of the next and consecutive ring steps overlap.
#include <vector>

#include "backend/cpu_algo_detail.h"

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

}  // namespace

void ring_allreduce(P2PChannel& ch, at::Tensor& x, RedOp op, int segments, uint32_t tag) {
  const Partition chunks(x.numel(), ch.size());
  ring_rs_phase(ch, x, chunks, op, segments, tag);
  ring_ag_phase(ch, x, chunks, segments, tag);
}

void ring_allgather(P2PChannel& ch, const at::Tensor& in, at::Tensor& out, int segments,
                    uint32_t tag) {
  const int64_t n = in.numel();
  copy_unless_same(span(out, ch.rank() * n, n), in);
  ring_ag_phase(ch, out, Partition(out.numel(), ch.size()), segments, tag);
}

void ring_reduce_scatter(P2PChannel& ch, const at::Tensor& in, at::Tensor& out, RedOp op,
                         int segments, uint32_t tag) {
  const int64_t n = out.numel();
  at::Tensor work = in.clone();  // the caller's input stays intact
  ring_rs_phase(ch, work, Partition(work.numel(), ch.size()), op, segments, tag);
  out.copy_(span(work, ch.rank() * n, n));
}

// Broadcast down the chain root, root+1, ...: each piece is forwarded as soon as it arrives,
// so for many pieces the time approaches one message time plus one piece per hop.
void chain_broadcast(P2PChannel& ch, at::Tensor& x, int root, int segments, uint32_t tag) {
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
void chain_reduce(P2PChannel& ch, at::Tensor& x, int root, RedOp op, int segments, uint32_t tag) {
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
    reduce_ordered(a, piece(x, segments, j), piece(tmp, segments, j), op);
    if (vr > 0) t.send(a, prev, tag);
  }
  t.wait_all();
}

}  // namespace cpu_detail
}  // namespace dynamiccl
