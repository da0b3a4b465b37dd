#include "rpc/base/cancellation.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(CancellationTest, CallbacksRunOnceOnCancel) {
  Cancellation c;
  int ran = 0;
  // What a callback holds is released once it ran (a shared_ptr's count).
  auto held = std::make_shared<int>(0);
  c.OnCancel([&ran, held] { ++ran; });
  c.OnCancel([&ran, held] { ++ran; });
  EXPECT_EQ(held.use_count(), 3);
  EXPECT_FALSE(c.cancelled());
  EXPECT_TRUE(c.Cancel(absl::CancelledError("gone")));
  EXPECT_EQ(ran, 2);
  EXPECT_TRUE(c.cancelled());
  EXPECT_EQ(c.reason(), absl::CancelledError("gone"));
  EXPECT_FALSE(c.Cancel(absl::DeadlineExceededError("later")));
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(c.reason().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(held.use_count(), 1);
}

TEST(CancellationTest, LateRegistrationRunsAtOnce) {
  Cancellation c;
  c.Cancel(absl::CancelledError("gone"));
  bool ran = false;
  EXPECT_EQ(c.OnCancel([&] { ran = true; }), 0u);
  EXPECT_TRUE(ran);
}

TEST(CancellationTest, RemovedCallbacksNeverRun) {
  Cancellation c;
  bool ran = false;
  Cancellation::Id id = c.OnCancel([&] { ran = true; });
  EXPECT_TRUE(c.Remove(id));
  EXPECT_FALSE(c.Remove(id));
  c.Cancel(absl::CancelledError("gone"));
  EXPECT_FALSE(ran);
}

TEST(CancellationTest, CallbackMayUseTheCancellation) {
  Cancellation c;
  Cancellation::Id other = c.OnCancel([] {});
  bool removed = true;
  c.OnCancel([&] { removed = c.Remove(other); });
  c.Cancel(absl::CancelledError("gone"));
  EXPECT_FALSE(removed);  // All callbacks were taken before any ran.
}

TEST(CancellationTest, ConcurrentRegistrationAndCancelRunEachOnce) {
  Cancellation c;
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) c.OnCancel([&] { ++ran; });
    });
  }
  c.Cancel(absl::CancelledError("gone"));
  for (auto& t : threads) t.join();
  EXPECT_EQ(ran.load(), 4000);
}

}  // namespace
}  // namespace ferry
