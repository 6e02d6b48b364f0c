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

 private:
  struct Task {
    Storages storages;
    std::function<void()> run;
  };
  void loop(int index);
  bool blocked(const Task& t) const;  // shares a storage with a running task

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::array<Storages, kThreads> running_;  // storages of each thread's task
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace dynamiccl
