// The CPU engine: Gloo for the native algorithm, our schedules (schedule.h) for every other arm.
// It also owns what only the CPU needs: AVG / PREMUL_SUM emulation (reduction.h) and the threads
// that run our schedules asynchronously (schedule_worker.h).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "core/types.h"
#include "engines/cpu/reduction.h"
#include "engines/cpu/schedule.h"
#include "engines/cpu/schedule_worker.h"

namespace dynamiccl {

// The caller's tensors of one call, as the CPU engine needs them (views valid during issue).
struct CpuCallArgs {
  OpKind op = OpKind::kAllReduce;
  Reduction reduction;                 // AVG / PREMUL_SUM become SUM plus a rescale
  c10::ArrayRef<at::Tensor> rescaled;  // what the rescale applies to on the native path
  c10::ArrayRef<at::Tensor> outputs;   // the future's value
  // Our schedules work on one flat buffer per side; null where the op has none.
  const at::Tensor* in = nullptr;
  const at::Tensor* out = nullptr;
  int root = 0;
  c10::ArrayRef<at::Tensor> gather_into;   // list-form all-gather: the pieces are copied here
  c10::ArrayRef<at::Tensor> scatter_from;  // list-form reduce-scatter: concatenated first
};

class CpuEngine {
 public:
  // `p2p`: the engine our schedules exchange data on: the group's Gloo, in a tag range of our own
  // (P2PChannel), so that a group opens no connections beyond its engine's.
  CpuEngine(c10::intrusive_ptr<c10d::Backend> p2p, std::chrono::milliseconds timeout);

  // The rescale step of a native call (null when nothing is rescaled), to run once it completed.
  std::function<void()> rescaler(const CpuCallArgs& args) const;
  // Attaches rescaler(args) to a native call's engine future: the returned future completes with
  // `args.outputs` once they are rescaled. Null when nothing is rescaled.
  c10::intrusive_ptr<c10::ivalue::Future> rescale_after(
      const CpuCallArgs& args, const c10::intrusive_ptr<c10::ivalue::Future>& engine_future) const;
  // Runs the call on the schedule of `action` on the engine's threads; the future completes with
  // `args.outputs` (or the error).
  c10::intrusive_ptr<c10::ivalue::Future> run_schedule(const CpuCallArgs& args,
                                                       const Action& action);
  // A coalesced batch of one op kind, tuned as one call: every part on the schedule of `action`,
  // in order; the future completes with `outputs` once all have (or with the first error).
  c10::intrusive_ptr<c10::ivalue::Future> run_batch(const std::vector<CpuCallArgs>& parts,
                                                    c10::ArrayRef<at::Tensor> outputs,
                                                    const Action& action);
  // A consensus round's all-reduce: `t` reduced in place with MIN over the group by recursive
  // doubling (log2 of the group's size in hops, and the same peers warm_connections warmed), on
  // the schedule threads, in issue order with the calls. Test arm effects do not apply.
  c10::intrusive_ptr<c10::ivalue::Future> min_allreduce(const at::Tensor& t);

  // Sends kWarmBytes to each peer our schedules talk to, on the connections they use, and
  // receives as much from each; every rank of the group calls it, before any schedule runs. TCP
  // opens a connection's congestion window as data flows (slow start), so the first large message
  // on a connection takes round trips that later ones do not (256 KiB on a 2 ms round trip: 10 ms
  // against 4.5, benchmarks/network/reruns/warm_connections/). Gloo's own connections open
  // during the default's first calls; without this, ours would open inside each arm's first
  // probes and make them read dearer than the arm is.
  static constexpr int64_t kWarmBytes = 256 << 10;
  void warm_connections();

  void set_timeout(std::chrono::milliseconds t) { channel_.set_timeout(t); }
  // Tests only (DYNAMICCL_TEST_SLOW_ARM / _BUSY_ARM), for `schedule` (an Action's algo;
  // kEverySchedule: all of ours). Slow: every call sleeps `us` first. Busy: every call slows the
  // caller's compute by `us`, which the caller pays (pay_test_debt) as its step ends, outside any
  // call's duration: an arm that holds the cores the step's compute needs.
  static constexpr int kEverySchedule = -2;
  void slow_schedule_for_tests(int schedule, std::chrono::microseconds us) {
    slow_ = {schedule, us};
  }
  void busy_schedule_for_tests(int schedule, std::chrono::microseconds us) {
    busy_ = {schedule, us};
  }
  void pay_test_debt() {
    const int64_t us = test_debt_us_.exchange(0);
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  // Runs what is queued, then joins the threads.
  void stop() { worker_.stop(); }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> enqueue(const CpuCallArgs& args, const Action& action,
                                                  bool test_effects);

  P2PChannel channel_;
  ScheduleWorker worker_;
  uint32_t next_tag_ = 0;
  struct TestEffect {
    int schedule = -1;  // none
    std::chrono::microseconds us{0};
    std::chrono::microseconds on(int algo) const {
      return schedule == algo || schedule == kEverySchedule ? us : std::chrono::microseconds(0);
    }
  };
  TestEffect slow_, busy_;
  std::atomic<int64_t> test_debt_us_{0};
};

}  // namespace dynamiccl
