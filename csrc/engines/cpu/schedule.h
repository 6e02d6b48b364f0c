// The CPU engine's own collective schedules (ring, recursive doubling, halving-doubling,
// binomial tree, each optionally segmented; pairwise and Bruck all-to-all), built on an inner
// engine's point-to-point operations with reductions done by ATen ops. They give the learner
// real choices on CPU whose best answer depends on message size, rank count and the network: the
// CPU analogue of NCCL's algorithms.
//
// A schedule family is one file (ring.cpp, recursive.cpp, tree.cpp, alltoall.cpp) that defines
// CpuSchedules: a name, and per collective how it runs, what it is expected to cost (the prior
// that orders probing) and which segment counts are offered as arms. The registry in
// schedules.cpp lists them; the arm catalog (arm_catalog.h) is built from it. Adding a schedule =
// its file + one line there (and its arm names in tests/python/test_cpu_algorithms.py, which
// checks every arm against Gloo).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/types.h"
#include "engines/cpu/cost_model.h"

namespace dynamiccl {

// Blocking point-to-point on the group's CPU engine (the one its native calls run on), in a tag
// range of its own: every tag on the wire is at least kFirstReservedTag, which the user's own
// send/recv may not use (the backend says so), so our messages never match theirs. Every wait
// honours `timeout`, so a peer that never arrives becomes an exception, not a hang.
class P2PChannel {
 public:
  static constexpr int kFirstReservedTag = 1 << 30;
  P2PChannel(c10::intrusive_ptr<c10d::Backend> pg, std::chrono::milliseconds timeout)
      : pg_(std::move(pg)), timeout_(timeout) {}
  int rank() const { return pg_->getRank(); }
  int size() const { return pg_->getSize(); }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Non-blocking issue; wait on the returned Work (with the timeout).
  c10::intrusive_ptr<c10d::Work> isend(at::Tensor& t, int dst, uint32_t tag);
  c10::intrusive_ptr<c10d::Work> irecv(at::Tensor& t, int src, uint32_t tag);
  void wait(const c10::intrusive_ptr<c10d::Work>& w);

 private:
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::chrono::milliseconds timeout_;
};

// Called in a catch block: rethrows the exception in flight naming `what` (what failed), in the
// class the user would have seen from the engine: c10 errors keep theirs (DistBackendError,
// DistNetworkError...), other std::exceptions reach Python as RuntimeError either way.
[[noreturn]] void rethrow_naming(const std::string& what);

using RedOp = c10d::ReduceOp::RedOpType;

// One call as a schedule sees it: flat, contiguous CPU tensors of a group of >= 2 ranks with
// something to move (execute_schedule() handles the trivial cases).
//   all-reduce, broadcast, reduce: `out` is the tensor, reduced / overwritten in place;
//   all-gather: `in` this rank's piece, `out` every rank's pieces in rank order;
//   reduce-scatter: `in` every rank's pieces in rank order, `out` this rank's reduced piece;
//   all-to-all: `in` one block per destination rank, `out` one block per source rank.
struct ScheduleCall {
  P2PChannel& ch;
  at::Tensor in;
  at::Tensor out;
  RedOp op = RedOp::SUM;  // SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR (AVG is the engine's job)
  int root = 0;
  int segments = 1;  // pieces each transfer is pipelined as (>= 1)
  uint32_t tag = 0;  // unique per call
};

struct CpuSchedule {
  struct Op {
    OpKind op;
    void (*run)(const ScheduleCall&);
    // Expected cost (µs) of `bytes` (the full message) on group `g` in `segments` pieces.
    double (*prior_us)(const CostShape& g, double bytes, int segments);
    std::vector<int> segments;  // offered as arms "<name>" (1) and "<name>_s<N>"
  };
  const char* name;
  std::vector<Op> ops;
  const Op* find(OpKind op) const;
};

// Every schedule, in arm order; Action::algo of a CPU arm indexes this list.
const std::vector<const CpuSchedule*>& cpu_schedules();

// The registered schedules (one per file).
const CpuSchedule& ring_schedule();
const CpuSchedule& recursive_doubling_schedule();
const CpuSchedule& halving_doubling_schedule();
const CpuSchedule& tree_schedule();
const CpuSchedule& pairwise_schedule();  // all-to-all only (alltoall.cpp)
const CpuSchedule& bruck_schedule();     // all-to-all only (alltoall.cpp)

// Runs `op` of `schedule` to completion on the calling thread: checks the tensors and the
// reduction, handles one rank and empty tensors, clamps the segments, and turns failures into
// errors that name the schedule (c10 errors keep their class, e.g. DistNetworkError).
void execute_schedule(const CpuSchedule& schedule, OpKind op, ScheduleCall call);

}  // namespace dynamiccl
