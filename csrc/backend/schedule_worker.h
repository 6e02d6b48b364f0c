// One thread per group that runs our CPU schedules in issue order. The schedules block on
// point-to-point receives, so they must not run on the caller's thread (the op would not be
// asynchronous) nor on the inner engine's threads (they would starve its own collectives).
// Issue order is the same on every rank, and a FIFO keeps it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dynamiccl {

class ScheduleWorker {
 public:
  ScheduleWorker() = default;
  ~ScheduleWorker();
  ScheduleWorker(const ScheduleWorker&) = delete;
  ScheduleWorker& operator=(const ScheduleWorker&) = delete;

  // Starts the thread on first use.
  void enqueue(std::function<void()> task);
  // Runs what is queued, then joins. Idempotent; later enqueue() calls throw.
  void stop();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::thread thread_;
  bool stopping_ = false;
};

}  // namespace dynamiccl
