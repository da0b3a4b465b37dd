// Blocking waits timed by a Timers' clock end when a test steps that
// clock (ManualTimers), not by real time; they leave no timer behind.
#include "rpc/base/timed_wait.h"

#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/base/future.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;

// Long on the manual clock: a wait ended by real time would not end in
// the test's time.
constexpr absl::Duration kLong = absl::Hours(1);

class TimedWaitTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (waiter_.joinable()) waiter_.join();
    EXPECT_FALSE(timers_.has_pending());  // Every wait dropped its timer.
  }

  // Steps the clock (running what is due) until `done`, bounded.
  void StepUntil(absl::Notification& done) {
    for (int i = 0; i < 100000; ++i) {
      if (done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) return;
      timers_.RunDue();
    }
    ADD_FAILURE() << "the wait never ended";
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
  std::thread waiter_;
};

TEST_F(TimedWaitTest, AwaitUntilEndsWhenTheClockReachesTheDeadline) {
  Promise<int> never;
  const absl::Time deadline = clock_.Now() + kLong;
  absl::StatusOr<int> result;
  absl::Notification done;
  waiter_ = std::thread([&] {
    result = AwaitUntil(timers_, never.future(), deadline);
    done.Notify();
  });
  timers_.Advance(kLong - absl::Milliseconds(1));
  EXPECT_FALSE(done.HasBeenNotified());
  timers_.Advance(absl::Milliseconds(1));
  StepUntil(done);
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_FALSE(never.future().IsReady());
}

TEST_F(TimedWaitTest, AwaitUntilReturnsTheResultWhenItComesFirst) {
  Promise<int> answer;
  absl::StatusOr<int> result;
  absl::Notification done;
  waiter_ = std::thread([&] {
    result = AwaitUntil(timers_, answer.future(), clock_.Now() + kLong);
    done.Notify();
  });
  answer.Set(7);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_OK(result.status());
  EXPECT_EQ(*result, 7);
}

TEST_F(TimedWaitTest, SleepOnEndsWhenTheClockGetsThere) {
  bool slept = false;
  absl::Notification done;
  waiter_ = std::thread([&] {
    slept = SleepOn(timers_, kLong, /*guard=*/absl::Hours(1));
    done.Notify();
  });
  while (!timers_.has_pending()) std::this_thread::yield();
  timers_.Advance(kLong - absl::Milliseconds(1));
  EXPECT_FALSE(done.HasBeenNotified());
  timers_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(slept);
}

TEST_F(TimedWaitTest, SleepOnStoppedTimersReturnsFalseAtOnce) {
  timers_.Stop();
  EXPECT_FALSE(SleepOn(timers_, kLong, /*guard=*/absl::Hours(1)));
}

}  // namespace
}  // namespace ferry
