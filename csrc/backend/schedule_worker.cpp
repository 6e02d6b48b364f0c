#include "backend/schedule_worker.h"

#include <c10/util/Exception.h>

namespace dynamiccl {

ScheduleWorker::~ScheduleWorker() { stop(); }

void ScheduleWorker::enqueue(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!stopping_, "dynamiccl: collective issued after the process group was shut down");
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  queue_.push_back(std::move(task));
  cv_.notify_one();
}

void ScheduleWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void ScheduleWorker::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // tasks report their own errors through their futures
  }
}

}  // namespace dynamiccl
