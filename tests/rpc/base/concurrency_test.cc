// Timers and Executor: ordering, cancellation, stopping.
#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/base/executor.h"
#include "rpc/base/timers.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

constexpr absl::Duration kWait = absl::Seconds(5);

// Records the order in which callbacks ran.
class Log {
 public:
  void Add(int v) {
    absl::MutexLock lock(&mu_);
    entries_.push_back(v);
  }
  std::vector<int> entries() {
    absl::MutexLock lock(&mu_);
    return entries_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> entries_;
};

// Occupies the timer thread until released, so later timers queue up.
std::shared_ptr<absl::Notification> BlockTimerThread(Timers* timers) {
  auto release = std::make_shared<absl::Notification>();
  timers->RunAt(absl::InfinitePast(),
                [release] { release->WaitForNotificationWithTimeout(kWait); });
  return release;
}

// ---- Timers ----

TEST(TimersTest, RunsCallback) {
  ThreadTimers timers;
  absl::Notification ran;
  EXPECT_NE(timers.RunAfter(absl::Milliseconds(1), [&] { ran.Notify(); }), 0u);
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(kWait));
}

// The thread idles on an empty queue without a timeout after running
// what was due: a new timer must wake it (RunAt signals only for times
// before the thread's own next look).
TEST(TimersTest, AnIdleThreadWakesForANewTimer) {
  ThreadTimers timers;
  for (int i = 0; i < 3; ++i) {
    absl::Notification ran;
    timers.RunAfter(absl::Milliseconds(1), [&] { ran.Notify(); });
    ASSERT_TRUE(ran.WaitForNotificationWithTimeout(kWait)) << "timer " << i;
  }
  // And a timer earlier than a far one already queued runs at its time.
  timers.RunAfter(absl::Hours(1), [] {});
  absl::Notification soon;
  timers.RunAfter(absl::Milliseconds(1), [&] { soon.Notify(); });
  EXPECT_TRUE(soon.WaitForNotificationWithTimeout(kWait));
}

TEST(TimersTest, RunInTimeOrderThenSubmissionOrder) {
  ThreadTimers timers;
  std::shared_ptr<absl::Notification> gate = BlockTimerThread(&timers);
  Log log;
  absl::Notification last;
  absl::Time base = absl::Now();
  timers.RunAt(base + absl::Milliseconds(3), [&] { log.Add(3); });
  timers.RunAt(base + absl::Milliseconds(1), [&] { log.Add(1); });
  timers.RunAt(base + absl::Milliseconds(2), [&] { log.Add(2); });
  timers.RunAt(base + absl::Milliseconds(2), [&] { log.Add(22); });
  timers.RunAt(base + absl::Milliseconds(4), [&] { last.Notify(); });
  gate->Notify();
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(kWait));
  EXPECT_THAT(log.entries(), ElementsAre(1, 2, 22, 3));
}

TEST(TimersTest, IdsAreDistinctAndNonZero) {
  ThreadTimers timers;
  Timers::TimerId a = timers.RunAfter(absl::Hours(1), [] {});
  Timers::TimerId b = timers.RunAfter(absl::Hours(1), [] {});
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
}

TEST(TimersTest, CancelPendingReturnsTrueOnce) {
  ThreadTimers timers;
  Timers::TimerId id = timers.RunAfter(absl::Hours(1), [] {});
  EXPECT_TRUE(timers.Cancel(id));
  EXPECT_FALSE(timers.Cancel(id));
  EXPECT_FALSE(timers.Cancel(0));
}

TEST(TimersTest, CancelPreventsRunning) {
  ThreadTimers timers;
  std::shared_ptr<absl::Notification> gate = BlockTimerThread(&timers);
  std::atomic<bool> cancelled_ran{false};
  absl::Notification after;
  Timers::TimerId id =
      timers.RunAt(absl::InfinitePast(), [&] { cancelled_ran = true; });
  timers.RunAfter(absl::ZeroDuration(), [&] { after.Notify(); });
  EXPECT_TRUE(timers.Cancel(id));
  gate->Notify();
  ASSERT_TRUE(after.WaitForNotificationWithTimeout(kWait));
  EXPECT_FALSE(cancelled_ran);
}

TEST(TimersTest, CancelAfterRunReturnsFalse) {
  ThreadTimers timers;
  absl::Notification ran;
  Timers::TimerId id =
      timers.RunAfter(absl::ZeroDuration(), [&] { ran.Notify(); });
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(kWait));
  EXPECT_FALSE(timers.Cancel(id));
}

TEST(TimersTest, CancelReleasesCallback) {
  ThreadTimers timers;
  auto owned = std::make_shared<int>(1);
  Timers::TimerId id = timers.RunAfter(absl::Hours(1), [owned] {});
  EXPECT_EQ(owned.use_count(), 2);
  EXPECT_TRUE(timers.Cancel(id));
  EXPECT_EQ(owned.use_count(), 1);
}

TEST(TimersTest, RunAtAfterStopReturnsZeroAndDropsCallback) {
  ThreadTimers timers;
  timers.Stop();
  auto owned = std::make_shared<int>(1);
  EXPECT_EQ(timers.RunAfter(absl::ZeroDuration(), [owned] {}), 0u);
  EXPECT_EQ(owned.use_count(), 1);
}

TEST(TimersTest, StopDropsPendingCallbacks) {
  ThreadTimers timers;
  auto owned = std::make_shared<int>(1);
  timers.RunAfter(absl::Hours(1), [owned] {});
  timers.Stop();
  EXPECT_EQ(owned.use_count(), 1);
  timers.Stop();  // Idempotent.
}

TEST(TimersTest, CallbackMayScheduleTimers) {
  ThreadTimers timers;
  absl::Notification second;
  timers.RunAfter(absl::ZeroDuration(), [&] {
    timers.RunAfter(absl::ZeroDuration(), [&] { second.Notify(); });
  });
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(kWait));
}

TEST(TimersTest, CallbackMayCancelTimers) {
  ThreadTimers timers;
  std::shared_ptr<absl::Notification> gate = BlockTimerThread(&timers);
  std::atomic<bool> victim_ran{false};
  absl::Notification done;
  Timers::TimerId victim = 0;
  std::atomic<bool> cancelled{false};
  absl::Time base = absl::Now();
  timers.RunAt(base, [&] { cancelled = timers.Cancel(victim); });
  victim =
      timers.RunAt(base + absl::Milliseconds(1), [&] { victim_ran = true; });
  timers.RunAt(base + absl::Milliseconds(2), [&] { done.Notify(); });
  gate->Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(cancelled);
  EXPECT_FALSE(victim_ran);
}

// ---- Executor ----

TEST(ExecutorTest, RunsAllSubmittedTasks) {
  Executor executor(4);
  std::atomic<int> count{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(executor.Submit([&] { ++count; }));
  }
  executor.Stop();  // Drains the queue.
  EXPECT_EQ(count.load(), 100);
}

TEST(ExecutorTest, ZeroThreadsStillRuns) {
  Executor executor(0);
  absl::Notification ran;
  ASSERT_TRUE(executor.Submit([&] { ran.Notify(); }));
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(kWait));
}

TEST(ExecutorTest, SubmitAfterStopIsRefused) {
  Executor executor(1);
  executor.Stop();
  auto owned = std::make_shared<int>(1);
  EXPECT_FALSE(executor.Submit([owned] {}));
  EXPECT_EQ(owned.use_count(), 1);
}

TEST(ExecutorTest, QueueIsBounded) {
  Executor executor(1, /*max_queued=*/2);
  absl::Notification started, release;
  ASSERT_TRUE(executor.Submit([&] {
    started.Notify();
    release.WaitForNotificationWithTimeout(kWait);
  }));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  ASSERT_TRUE(executor.Submit([] {}));
  ASSERT_TRUE(executor.Submit([] {}));
  auto owned = std::make_shared<int>(1);
  absl::Status refused = executor.TrySubmit([owned] {});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("(--max_queued_tasks=2)"),
            absl::string_view::npos)
      << refused;
  EXPECT_EQ(owned.use_count(), 1);  // Dropped, never run.
  release.Notify();
  executor.Stop();
  EXPECT_EQ(executor.TrySubmit([] {}).code(), absl::StatusCode::kUnavailable);
}

TEST(ExecutorTest, QueuedAndRunningCounters) {
  Executor executor(1);
  absl::Notification started, release;
  ASSERT_TRUE(executor.Submit([&] {
    started.Notify();
    release.WaitForNotificationWithTimeout(kWait);
  }));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  ASSERT_TRUE(executor.Submit([] {}));
  ASSERT_TRUE(executor.Submit([] {}));
  EXPECT_EQ(executor.running(), 1);
  EXPECT_EQ(executor.queued(), 2);
  release.Notify();
  executor.Stop();
  EXPECT_EQ(executor.running(), 0);
  EXPECT_EQ(executor.queued(), 0);
}

TEST(ExecutorTest, TasksRunConcurrently) {
  Executor executor(2);
  absl::Notification a_started, b_started;
  // Each task waits for the other: only possible on two threads at once.
  ASSERT_TRUE(executor.Submit([&] {
    a_started.Notify();
    b_started.WaitForNotificationWithTimeout(kWait);
  }));
  ASSERT_TRUE(executor.Submit([&] {
    b_started.Notify();
    a_started.WaitForNotificationWithTimeout(kWait);
  }));
  EXPECT_TRUE(a_started.WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(b_started.WaitForNotificationWithTimeout(kWait));
  executor.Stop();
}

TEST(ExecutorTest, StopWithDeadlineDetachesBlockedTask) {
  // Shared so the detached thread never touches freed memory.
  auto started = std::make_shared<absl::Notification>();
  auto release = std::make_shared<absl::Notification>();
  auto finished = std::make_shared<absl::Notification>();
  {
    auto executor = std::make_unique<Executor>(1);
    ASSERT_TRUE(executor->Submit([started, release, finished] {
      started->Notify();
      release->WaitForNotification();
      finished->Notify();
    }));
    ASSERT_TRUE(started->WaitForNotificationWithTimeout(kWait));
    executor->Stop(absl::Milliseconds(50));
    EXPECT_FALSE(finished->HasBeenNotified());
    EXPECT_FALSE(executor->Submit([] {}));
  }  // Destroying the executor does not wait for the blocked task either.
  release->Notify();
  EXPECT_TRUE(finished->WaitForNotificationWithTimeout(kWait));
}

}  // namespace
}  // namespace ferry
