// Helpers shared by the CPU schedules (ring.cpp, recursive.cpp, tree.cpp, alltoall.cpp):
// partitioning a message into chunks and pipelined pieces, ordered reductions, and bookkeeping of
// outstanding transfers.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engines/cpu/schedule.h"

namespace dynamiccl {
namespace cpu_detail {

// `count` elements split into `parts` contiguous ranges whose sizes differ by at most one (the
// first count % parts ranges get the extra element). Every rank computes the same split, which
// is what lets both sides of a transfer agree on its size without exchanging it.
class Partition {
 public:
  Partition(int64_t count, int64_t parts) : base_(count / parts), rem_(count % parts) {}
  int64_t begin(int64_t i) const { return i * base_ + std::min(i, rem_); }
  int64_t size(int64_t i) const { return base_ + (i < rem_ ? 1 : 0); }

 private:
  int64_t base_;
  int64_t rem_;
};

// Elements [begin, begin + len) of a flat tensor, as a view.
inline at::Tensor span(const at::Tensor& flat, int64_t begin, int64_t len) {
  return flat.narrow(0, begin, len);
}

// Piece j of `segments` of a view.
inline at::Tensor piece(const at::Tensor& view, int segments, int j) {
  const Partition p(view.numel(), segments);
  return view.narrow(0, p.begin(j), p.size(j));
}

// out = first (op) second. `out` may alias either operand. Callers pass the lower rank's data
// as `first` wherever two ranks compute the same combination, so that both get the same bits
// even for operations that are not bitwise commutative (min/max of signed zeros).
void reduce_ordered(at::Tensor& out, const at::Tensor& first, const at::Tensor& second, RedOp op);

// Transfers in flight. Empty tensors move no bytes: both sides of every transfer compute the
// same size, so both skip it. A Work owns its tensor and its Gloo buffer, and Gloo refers to
// pending buffers only weakly, so dropping the list after an error (a dead or absent peer)
// cannot make Gloo write into freed memory.
class Transfers {
 public:
  explicit Transfers(P2PChannel& ch) : ch_(ch) {}
  // Index of the transfer (for wait(i)), or -1 when nothing was posted.
  int send(at::Tensor t, int dst, uint32_t tag);
  int recv(at::Tensor t, int src, uint32_t tag);
  void wait(int i);  // no-op for -1 and for an already waited transfer
  void wait_all();
  size_t size() const { return works_.size(); }

 private:
  P2PChannel& ch_;
  std::vector<at::Tensor> tensors_;  // the lvalues the inner engine's API wants
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

// A view sent or received as `segments` pieces, in piece order (both sides post them in the
// same order, and the inner engine delivers a pair's messages with one tag in order).
inline void send_pieces(Transfers& t, const at::Tensor& view, int peer, int segments,
                        uint32_t tag) {
  for (int j = 0; j < segments; ++j) t.send(piece(view, segments, j), peer, tag);
}
inline std::vector<int> recv_pieces(Transfers& t, const at::Tensor& view, int peer, int segments,
                                    uint32_t tag) {
  std::vector<int> ids(static_cast<size_t>(segments));
  for (int j = 0; j < segments; ++j) {
    ids[static_cast<size_t>(j)] = t.recv(piece(view, segments, j), peer, tag);
  }
  return ids;
}

// Rank geometry of the recursive schedules on any rank count: the largest power of two p2 <=
// size takes part in the butterfly; the first 2 * extra ranks (extra = size - p2) are paired
// (even, odd) and the even one folds its data into the odd one before and receives the result
// after. Virtual rank v of the butterfly stands for real blocks [first_block(v),
// first_block(v + 1)): two blocks for the paired ranks, one otherwise, so a contiguous range of
// virtual ranks is always a contiguous range of real blocks.
struct Fold {
  explicit Fold(int size);
  int p2 = 1;
  int extra = 0;
  int log2p = 0;
  // -1 for an even rank that folds out.
  int vrank(int r) const {
    if (r < 2 * extra) return (r % 2 == 1) ? r / 2 : -1;
    return r - extra;
  }
  int real(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  int first_block(int v) const { return v < extra ? 2 * v : v + extra; }
};

}  // namespace cpu_detail
}  // namespace dynamiccl
