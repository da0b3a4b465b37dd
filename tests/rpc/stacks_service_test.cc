// ferry.stacks' captures (rpc/stacks_service.h): on a thread of their own,
// one at a time (requests meanwhile share it), at most once per interval
// (requests within it get the last one). Issue 49 R7: 32 callers looping
// ferry.stacks, each capture on the executor under a process-wide lock,
// took an honest call from 0.7 ms to 564 ms.
#include "rpc/stacks_service.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;

constexpr absl::Duration kBound = absl::Seconds(30);  // Only a hang.

// A capture the test holds until it says so; it answers with how many
// captures ran before it.
class HeldCapture {
 public:
  Value Run() {
    int n;
    {
      absl::MutexLock lock(&mu_);
      n = runs_++;
      thread_ = std::this_thread::get_id();
    }
    if (!started_.HasBeenNotified()) started_.Notify();  // One at a time.
    release_.WaitForNotificationWithTimeout(kBound);
    return Value(static_cast<int64_t>(n));
  }
  bool AwaitStarted() {
    return started_.WaitForNotificationWithTimeout(kBound);
  }
  void Release() { release_.Notify(); }
  std::thread::id thread() {
    absl::MutexLock lock(&mu_);
    return thread_;
  }

 private:
  absl::Mutex mu_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread::id thread_ ABSL_GUARDED_BY(mu_);
  absl::Notification started_, release_;
};

TEST(StacksServiceTest, RequestsDuringACaptureShareItOnItsOwnThread) {
  ManualClock clock;
  HeldCapture capture;
  StacksService stacks(
      {.capture = [&] { return capture.Run(); }, .clock = &clock});
  Future<Value> first = stacks.Get();
  ASSERT_TRUE(capture.AwaitStarted());
  std::vector<Future<Value>> joined;
  for (int i = 0; i < 32; ++i) joined.push_back(stacks.Get());
  capture.Release();
  ASSERT_EQ(first.Wait(kBound)->as_int(), 0);
  for (Future<Value>& f : joined) EXPECT_EQ(f.Wait(kBound)->as_int(), 0);
  EXPECT_EQ(stacks.captures(), 1);
  EXPECT_NE(capture.thread(), std::this_thread::get_id());
}

TEST(StacksServiceTest, AtMostOneCapturePerInterval) {
  ManualClock clock;
  HeldCapture capture;
  capture.Release();  // Captures run through.
  StacksService stacks({.capture = [&] { return capture.Run(); },
                        .min_interval = absl::Seconds(1),
                        .clock = &clock});
  ASSERT_EQ(stacks.Get().Wait(kBound)->as_int(), 0);
  clock.Advance(absl::Milliseconds(999));
  for (int i = 0; i < 100; ++i) {
    Future<Value> again = stacks.Get();
    ASSERT_TRUE(again.IsReady());  // The last one, at once.
    EXPECT_EQ(again.Wait(kBound)->as_int(), 0);
  }
  EXPECT_EQ(stacks.captures(), 1);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(stacks.Get().Wait(kBound)->as_int(), 1);
  EXPECT_EQ(stacks.captures(), 2);
}

}  // namespace
}  // namespace ferry
