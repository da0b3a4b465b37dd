#include "rpc/base/future.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;

TEST(FutureTest, DefaultIsInvalid) {
  Future<int> f;
  EXPECT_FALSE(f.valid());
  Promise<int> p;
  EXPECT_TRUE(p.future().valid());
}

TEST(FutureTest, SetOnce) {
  Promise<int> p;
  Future<int> f = p.future();
  EXPECT_FALSE(f.IsReady());
  EXPECT_TRUE(p.Set(1));
  EXPECT_TRUE(f.IsReady());
  EXPECT_FALSE(p.Set(2));
  EXPECT_FALSE(p.Set(absl::CancelledError("late")));
  ASSERT_OK_AND_ASSIGN(int v, f.Wait(absl::Seconds(5)));
  EXPECT_EQ(v, 1);
}

TEST(FutureTest, ErrorResult) {
  Promise<int> p;
  p.Set(absl::NotFoundError("gone"));
  EXPECT_THAT(p.future().Wait(absl::Seconds(5)),
              StatusIs(absl::StatusCode::kNotFound, "gone"));
}

TEST(FutureTest, ReadyIsAlreadySet) {
  Future<std::string> f = Future<std::string>::Ready("x");
  EXPECT_TRUE(f.IsReady());
  ASSERT_OK_AND_ASSIGN(std::string v, f.Wait(absl::ZeroDuration()));
  EXPECT_EQ(v, "x");
  EXPECT_THAT(
      Future<int>::Ready(absl::AbortedError("a")).Wait(absl::Seconds(5)),
      StatusIs(absl::StatusCode::kAborted));
}

TEST(FutureTest, ThenBeforeSetRunsOnceOnSet) {
  Promise<int> p;
  int calls = 0, seen = 0;
  p.future().Then([&](const absl::StatusOr<int>& r) {
    ++calls;
    seen = *r;
  });
  EXPECT_EQ(calls, 0);
  p.Set(7);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, 7);
  p.Set(8);
  EXPECT_EQ(calls, 1);
}

TEST(FutureTest, ThenAfterSetRunsInlineOnce) {
  Promise<int> p;
  p.Set(3);
  int calls = 0;
  p.future().Then([&](const absl::StatusOr<int>& r) {
    ++calls;
    EXPECT_EQ(*r, 3);
  });
  EXPECT_EQ(calls, 1);
  p.Set(4);
  EXPECT_EQ(calls, 1);
}

TEST(FutureTest, SeveralThensAllRun) {
  Promise<int> p;
  int calls = 0;
  for (int i = 0; i < 3; ++i) {
    p.future().Then([&](const absl::StatusOr<int>&) { ++calls; });
  }
  p.Set(0);
  EXPECT_EQ(calls, 3);
}

TEST(FutureTest, ThenSeesError) {
  Promise<int> p;
  absl::Status seen;
  p.future().Then([&](const absl::StatusOr<int>& r) { seen = r.status(); });
  p.Set(absl::UnavailableError("peer died"));
  EXPECT_EQ(seen.code(), absl::StatusCode::kUnavailable);
}

TEST(FutureTest, MapTransformsValue) {
  Promise<int> p;
  Future<std::string> m = p.future().Map(
      [](const absl::StatusOr<int>& r) -> absl::StatusOr<std::string> {
        if (!r.ok()) return r.status();
        return std::to_string(*r * 2);
      });
  EXPECT_FALSE(m.IsReady());
  p.Set(21);
  ASSERT_OK_AND_ASSIGN(std::string v, m.Wait(absl::Seconds(5)));
  EXPECT_EQ(v, "42");
}

TEST(FutureTest, MapPropagatesError) {
  Future<int> f = Future<int>::Ready(absl::InternalError("bad"));
  Future<int> m =
      f.Map([](const absl::StatusOr<int>& r) -> absl::StatusOr<int> {
        if (!r.ok()) return r.status();
        return *r + 1;
      });
  EXPECT_THAT(m.Wait(absl::Seconds(5)),
              StatusIs(absl::StatusCode::kInternal, "bad"));
}

TEST(FutureTest, WaitTimeoutIsDeadlineExceededAndFutureStaysUsable) {
  Promise<int> p;
  Future<int> f = p.future();
  EXPECT_THAT(f.Wait(absl::Milliseconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  p.Set(5);
  ASSERT_OK_AND_ASSIGN(int v, f.Wait(absl::Seconds(5)));
  EXPECT_EQ(v, 5);
}

TEST(FutureTest, WaitWakesWhenSetFromAnotherThread) {
  Promise<int> p;
  std::thread setter([p] { p.Set(9); });
  ASSERT_OK_AND_ASSIGN(int v, p.future().Wait(absl::Seconds(5)));
  EXPECT_EQ(v, 9);
  setter.join();
}

TEST(FutureTest, CallbackMayCallThenOnSameFuture) {
  Promise<int> p;
  Future<int> f = p.future();
  int inner = 0;
  f.Then([&](const absl::StatusOr<int>&) {
    // Runs outside the lock: re-entering the future must not deadlock.
    EXPECT_TRUE(f.IsReady());
    f.Then([&](const absl::StatusOr<int>& r) { inner = *r; });
  });
  p.Set(11);
  EXPECT_EQ(inner, 11);
}

TEST(FutureTest, InlineCallbackMayCallThenOnSameFuture) {
  Future<int> f = Future<int>::Ready(4);
  int inner = 0;
  f.Then([&](const absl::StatusOr<int>&) {
    f.Then([&](const absl::StatusOr<int>& r) { inner = *r; });
  });
  EXPECT_EQ(inner, 4);
}

TEST(FutureTest, CallbackMaySetAgainWithoutDeadlock) {
  Promise<int> p;
  bool second_set = true;
  p.future().Then([&](const absl::StatusOr<int>&) { second_set = p.Set(2); });
  EXPECT_TRUE(p.Set(1));
  EXPECT_FALSE(second_set);
}

TEST(FutureTest, ConcurrentSetOnlyOneWins) {
  Promise<int> p;
  std::atomic<int> wins{0}, callbacks{0};
  p.future().Then([&](const absl::StatusOr<int>&) { ++callbacks; });
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      go.WaitForNotification();
      if (p.Set(i)) ++wins;
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(callbacks.load(), 1);
  ASSERT_OK_AND_ASSIGN(int v, p.future().Wait(absl::Seconds(5)));
  EXPECT_GE(v, 0);
  EXPECT_LT(v, 8);
}

TEST(FutureTest, ConcurrentThenAndSetRunEachCallbackOnce) {
  Promise<int> p;
  std::atomic<int> callbacks{0};
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      go.WaitForNotification();
      for (int k = 0; k < 100; ++k) {
        p.future().Then([&](const absl::StatusOr<int>&) { ++callbacks; });
      }
    });
  }
  threads.emplace_back([&] {
    go.WaitForNotification();
    p.Set(1);
  });
  go.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(callbacks.load(), 400);
}

TEST(FutureTest, DoneFuture) {
  Promise<Done> p;
  p.Set(Done());
  EXPECT_OK(p.future().Wait(absl::Seconds(5)));
}

}  // namespace
}  // namespace ferry
