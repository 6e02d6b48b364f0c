#include "engines/cpu/schedule_worker.h"

#include <algorithm>

#include <c10/util/Exception.h>
#include <c10/util/thread_name.h>

namespace dynamiccl {

ScheduleWorker::~ScheduleWorker() { stop(); }

void ScheduleWorker::enqueue(Storages storages, std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!stopping_, "dynamiccl: collective issued after the process group was shut down");
  if (threads_.empty()) {
    for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  queue_.push_back({std::move(storages), std::move(task)});
  wake_one();
}

void ScheduleWorker::wake_one() {
  if (queue_.empty() || idle_.empty()) return;
  // Taken off the list as it is woken: a second task issued before it runs wakes the other one.
  const int index = idle_.back();
  idle_.pop_back();
  wake_[static_cast<size_t>(index)].notify_one();
}

void ScheduleWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (std::condition_variable& cv : wake_) cv.notify_all();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int ScheduleWorker::idle_threads() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(idle_.size());
}

bool ScheduleWorker::blocked(const Task& t) const {
  for (const Storages& busy : running_) {
    for (const void* s : t.storages) {
      if (std::find(busy.begin(), busy.end(), s) != busy.end()) return true;
    }
  }
  return false;
}

void ScheduleWorker::loop(int index) {
  c10::setThreadName("dccl_schedule");  // tells our threads from Gloo's in top -H and profiles
  // Only the oldest queued task may start: issue order is kept.
  auto ready = [this] {
    return (stopping_ && queue_.empty()) || (!queue_.empty() && !blocked(queue_.front()));
  };
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    while (!ready()) {
      idle_.push_back(index);
      wake_[static_cast<size_t>(index)].wait(lock);
      // Still listed after a spurious or stop() wake-up (wake_one() takes a thread off).
      auto listed = std::find(idle_.begin(), idle_.end(), index);
      if (listed != idle_.end()) idle_.erase(listed);
    }
    if (queue_.empty()) return;  // stopping and drained
    Task task = std::move(queue_.front());
    queue_.pop_front();
    running_[index] = std::move(task.storages);
    wake_one();  // a next task may be free to start on another thread
    lock.unlock();
    task.run();          // tasks report their own errors through their futures
    task.run = nullptr;  // what it captured (tensors, the future) is freed outside the lock
    lock.lock();
    // No wake-up: this thread now checks the queue itself, and a task that waited for these
    // storages is free for it (one still blocked waits for a running task, not an idle one).
    running_[index].clear();
  }
}

}  // namespace dynamiccl
