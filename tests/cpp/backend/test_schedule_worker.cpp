// The threads that run our CPU schedules (engines/cpu/schedule_worker.h): two schedules on
// different tensors run at once, schedules on one tensor run in issue order, and a synchronous
// caller's calls stay on one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include <c10/util/Exception.h>

#include "engines/cpu/schedule_worker.h"

namespace dynamiccl {
namespace {

using std::chrono::milliseconds;

int storage_a = 0;
int storage_b = 0;

TEST(ScheduleWorker, TasksOnDifferentStoragesRunAtOnce) {
  ScheduleWorker worker;
  std::promise<void> second_started;
  std::promise<bool> first_saw_it;
  auto started = second_started.get_future().share();
  worker.enqueue({&storage_a}, [&] {
    // Only a second thread can start the next task while this one waits for it.
    first_saw_it.set_value(started.wait_for(milliseconds(10000)) == std::future_status::ready);
  });
  worker.enqueue({&storage_b}, [&] { second_started.set_value(); });
  EXPECT_TRUE(first_saw_it.get_future().get());
}

TEST(ScheduleWorker, TasksOnOneStorageRunInIssueOrderOneAtATime) {
  ScheduleWorker worker;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  std::vector<int> order;
  std::promise<void> done;
  constexpr int kTasks = 20;
  for (int i = 0; i < kTasks; ++i) {
    worker.enqueue({&storage_a}, [&, i] {
      if (running.fetch_add(1) != 0) overlapped = true;
      std::this_thread::sleep_for(milliseconds(1));
      order.push_back(i);
      running.fetch_sub(1);
      if (i == kTasks - 1) done.set_value();
    });
  }
  done.get_future().wait();
  EXPECT_FALSE(overlapped.load());
  std::vector<int> expected(kTasks);
  for (int i = 0; i < kTasks; ++i) expected[static_cast<size_t>(i)] = i;
  EXPECT_EQ(order, expected);
}

// With a plain condition variable the longest-waiting thread took each call, so a synchronous
// loop alternated between the two (and Gloo's event loop spun longer on a machine whose ranks
// share cores); the thread that went idle last must take the next call.
TEST(ScheduleWorker, ASynchronousCallersCallsStayOnOneThread) {
  ScheduleWorker worker;
  std::map<std::thread::id, int> runs;
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    std::promise<std::thread::id> ran_on;
    worker.enqueue({&storage_a}, [&] { ran_on.set_value(std::this_thread::get_id()); });
    ++runs[ran_on.get_future().get()];
    // The next call is issued once the thread is back waiting, as a synchronous caller's next
    // call usually is (a fixed sleep left a loaded machine's thread still on its way back).
    while (worker.idle_threads() < ScheduleWorker::kThreads) std::this_thread::yield();
  }
  int most = 0;
  for (const auto& [id, n] : runs) most = std::max(most, n);
  EXPECT_GE(most, kCalls - 2) << runs.size() << " threads ran the calls";
}

TEST(ScheduleWorker, StopRunsWhatIsQueuedThenRefusesNewTasks) {
  ScheduleWorker worker;
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i) worker.enqueue({&storage_a}, [&] { ++ran; });
  worker.stop();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_THROW(worker.enqueue({&storage_b}, [] {}), c10::Error);
}

}  // namespace
}  // namespace dynamiccl
