// Binomial-tree schedules: reduce to a root, broadcast from a root, and all-reduce as reduce to
// rank 0 followed by broadcast from it. With `segments` > 1 the message travels as pieces: a
// node passes piece j on while piece j+1 is still arriving, and rank 0 starts broadcasting
// piece j as soon as it is reduced.
#include <vector>

#include "engines/cpu/schedule_util.h"

namespace dynamiccl {
namespace cpu_detail {
namespace {

// Node `rank` of the binomial tree rooted at `root`, numbered relative to the root (vr): the
// parent of vr clears its lowest set bit; its children are vr + 2^i for 2^i below that bit.
struct BinomialNode {
  BinomialNode(int size, int rank, int root) {
    const int vr = ((rank - root) % size + size) % size;
    auto real = [&](int v) { return (v + root) % size; };
    for (int mask = 1; mask < size; mask <<= 1) {
      if (vr & mask) {
        parent = real(vr - mask);
        break;
      }
      if (vr + mask < size) children.push_back(real(vr + mask));
    }
  }
  int parent = -1;            // -1 at the root
  std::vector<int> children;  // nearest (smallest subtree) first
};

// Reduces the subtree's data into `acc` (this rank's data on entry) and sends each finished
// piece to the parent at once; `on_piece(j)` runs when piece j is final here. Children are
// combined in rank order after our own data, so the root computes (((x0 x1) (x2 x3)) ...).
// Two receive buffers per child bound the memory to two pieces per child.
template <typename OnPiece>
void reduce_up(Transfers& t, const BinomialNode& node, const at::Tensor& acc, RedOp op, int segs,
               uint32_t tag, OnPiece&& on_piece) {
  const Partition pieces(acc.numel(), segs);
  const size_t nc = node.children.size();
  at::Tensor bufs;
  if (nc > 0) bufs = at::empty({static_cast<int64_t>(nc), 2, pieces.size(0)}, acc.options());
  auto slot = [&](size_t c, int j) {
    return bufs.select(0, static_cast<int64_t>(c)).select(0, j % 2).narrow(0, 0, pieces.size(j));
  };
  std::vector<int> ids(nc * 2, -1);
  for (int j = 0; j < std::min(segs, 2); ++j) {
    for (size_t c = 0; c < nc; ++c) {
      ids[c * 2 + j % 2] = t.recv(slot(c, j), node.children[c], tag);
    }
  }
  for (int j = 0; j < segs; ++j) {
    at::Tensor a = piece(acc, segs, j);
    for (size_t c = 0; c < nc; ++c) {
      t.wait(ids[c * 2 + j % 2]);
      if (a.numel() > 0) reduce_ordered(a, a, slot(c, j), op);
      if (j + 2 < segs) ids[c * 2 + j % 2] = t.recv(slot(c, j + 2), node.children[c], tag);
    }
    if (node.parent >= 0) t.send(a, node.parent, tag);
    on_piece(j);
  }
}

// Sends piece j to every child, farthest subtree first so the deepest path starts earliest.
void send_down(Transfers& t, const BinomialNode& node, const at::Tensor& x, int segs, int j,
               uint32_t tag) {
  for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
    t.send(piece(x, segs, j), *it, tag);
  }
}

// Non-root half of a broadcast: receive every piece from the parent and pass it down.
void relay_down(Transfers& t, const BinomialNode& node, const at::Tensor& x, int segs,
                uint32_t tag) {
  std::vector<int> ids = recv_pieces(t, x, node.parent, segs, tag);
  for (int j = 0; j < segs; ++j) {
    t.wait(ids[static_cast<size_t>(j)]);
    send_down(t, node, x, segs, j, tag);
  }
}

void tree_allreduce(P2PChannel& ch, const at::Tensor& x, RedOp op, int segments, uint32_t tag) {
  const BinomialNode node(ch.size(), ch.rank(), 0);
  Transfers up(ch);
  Transfers down(ch);
  const bool is_root = node.parent < 0;
  reduce_up(up, node, x, op, segments, tag, [&](int j) {
    if (is_root) send_down(down, node, x, segments, j, tag);
  });
  if (!is_root) {
    // The pieces sent up are read from x, which the broadcast overwrites.
    up.wait_all();
    relay_down(down, node, x, segments, tag);
  }
  down.wait_all();
  up.wait_all();
}

void tree_broadcast(P2PChannel& ch, const at::Tensor& x, int root, int segments, uint32_t tag) {
  const BinomialNode node(ch.size(), ch.rank(), root);
  Transfers t(ch);
  if (node.parent < 0) {
    for (int j = 0; j < segments; ++j) send_down(t, node, x, segments, j, tag);
  } else {
    relay_down(t, node, x, segments, tag);
  }
  t.wait_all();
}

void tree_reduce(P2PChannel& ch, const at::Tensor& x, int root, RedOp op, int segments,
                 uint32_t tag) {
  const BinomialNode node(ch.size(), ch.rank(), root);
  // Inner nodes accumulate into scratch so that, as with NCCL, only the root's tensor changes.
  const bool inner = node.parent >= 0 && !node.children.empty();
  at::Tensor acc = inner ? x.clone() : x;
  Transfers t(ch);
  reduce_up(t, node, acc, op, segments, tag, [](int) {});
  t.wait_all();
}

// --- Priors: the root's link carries the message once per level whatever the segmentation;
// segments only overlap levels (after a fill of one piece per level).

double tree_phase_us(const CostShape& g, double n, int s, bool reduce) {
  const double gamma = reduce ? kGammaUsPerByte : 0.0;
  const double fill = s > 1 ? (g.ceil_log2p - 1) * (kAlphaUs + n / s * (kBetaUsPerByte + gamma))
                            : 0.0;
  return g.ceil_log2p * (step_latency_us(s) + n * kBetaUsPerByte + n * gamma / s) + fill;
}
double tree_allreduce_us(const CostShape& g, double n, int s) {
  return tree_phase_us(g, n, s, true) + tree_phase_us(g, n, s, false);
}
double tree_broadcast_us(const CostShape& g, double n, int s) {
  return tree_phase_us(g, n, s, false);
}
double tree_reduce_us(const CostShape& g, double n, int s) { return tree_phase_us(g, n, s, true); }

}  // namespace
}  // namespace cpu_detail

const CpuSchedule& tree_schedule() {
  using namespace cpu_detail;
  static const CpuSchedule schedule{
      "tree",
      {{OpKind::kAllReduce,
        [](const ScheduleCall& c) { tree_allreduce(c.ch, c.out, c.op, c.segments, c.tag); },
        tree_allreduce_us,
        {1, 4}},
       {OpKind::kBroadcast,
        [](const ScheduleCall& c) { tree_broadcast(c.ch, c.out, c.root, c.segments, c.tag); },
        tree_broadcast_us,
        {1, 4}},
       {OpKind::kReduce,
        [](const ScheduleCall& c) { tree_reduce(c.ch, c.out, c.root, c.op, c.segments, c.tag); },
        tree_reduce_us,
        {1, 4}}}};
  return schedule;
}

}  // namespace dynamiccl
