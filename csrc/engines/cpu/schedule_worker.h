// The threads of one group that run our CPU schedules, in issue order. The schedules block on
// point-to-point receives, so they must not run on the caller's thread (the op would not be
// asynchronous) nor on the inner engine's threads (they would starve its own collectives).
//
// kThreads schedules run at once, as ProcessGroupGloo runs two collectives at once with its
// default two threads: a latency-bound schedule (a DDP bucket at 1 ms per hop) must not hold
// back the next bucket any more than Gloo's own algorithm would. Tasks start in issue order
// (the same on every rank), so the oldest unfinished schedule is always running on every rank
// and none can wait for a peer forever. Unlike Gloo, a task that shares a tensor storage with a
// running one waits for it: our schedules on the same tensors complete in issue order (a call
// that takes the engine default runs on Gloo's threads, as it would without us).
#pragma once

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <c10/util/SmallVector.h>

namespace dynamiccl {

class ScheduleWorker {
 public:
  static constexpr int kThreads = 2;
  // Identities of the tensor storages a task reads or writes (inline up to two: one-tensor ops
  // allocate nothing for it).
  using Storages = c10::SmallVector<const void*, 2>;

  ScheduleWorker() = default;
  ~ScheduleWorker();
  ScheduleWorker(const ScheduleWorker&) = delete;
  ScheduleWorker& operator=(const ScheduleWorker&) = delete;

  // Starts the threads on first use.
  void enqueue(Storages storages, std::function<void()> task);
  // Runs what is queued, then joins. Idempotent; later enqueue() calls throw.
  void stop();
  // Threads waiting for a task (tests: a call's thread is back waiting once this is kThreads).
  int idle_threads();

 private:
  struct Task {
    Storages storages;
    std::function<void()> run;
  };
  void loop(int index);
  bool blocked(const Task& t) const;  // shares a storage with a running task
  void wake_one();                    // the most recently idle thread, if a task is queued

  std::mutex mu_;
  // One wake-up per thread: the thread that went idle last takes the next task, and an idle
  // thread is woken only for a queued task. A synchronous caller's calls then run on one warm
  // thread; waking the longest waiter (a plain condition variable) made them alternate between
  // the two, which on a machine whose ranks share cores doubled the time Gloo's event loop
  // spins on a pair's lock held by a preempted poster (benchmarks/results/tiny_allreduce.md).
  std::array<std::condition_variable, kThreads> wake_;
  std::vector<int> idle_;  // indexes of the waiting threads, the most recent last
  std::deque<Task> queue_;
  std::array<Storages, kThreads> running_;  // storages of each thread's task
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace dynamiccl
