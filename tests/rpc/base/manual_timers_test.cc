// The hand-stepped clock and timers that protocol tests run on.
#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::testing::ElementsAre;

TEST(ManualTimersTest, RunInTimeOrderThenSubmissionOrderWhenAdvanced) {
  ManualClock clock;
  ManualTimers timers(&clock);
  std::vector<int> ran;
  timers.RunAfter(absl::Seconds(3), [&] { ran.push_back(3); });
  timers.RunAfter(absl::Seconds(1), [&] { ran.push_back(1); });
  timers.RunAfter(absl::Seconds(2), [&] { ran.push_back(2); });
  timers.RunAfter(absl::Seconds(2), [&] { ran.push_back(22); });
  const absl::Time start = clock.Now();
  timers.Advance(absl::Milliseconds(1999));
  EXPECT_THAT(ran, ElementsAre(1));
  timers.Advance(absl::Milliseconds(1));
  EXPECT_THAT(ran, ElementsAre(1, 2, 22));
  timers.Advance(absl::Seconds(5));
  EXPECT_THAT(ran, ElementsAre(1, 2, 22, 3));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(7));
  EXPECT_FALSE(timers.has_pending());
}

TEST(ManualTimersTest, CallbacksSeeTheirOwnTimeAndMayScheduleMore) {
  ManualClock clock;
  ManualTimers timers(&clock);
  const absl::Time start = clock.Now();
  std::vector<absl::Duration> at;
  std::function<void()> tick = [&] {
    at.push_back(clock.Now() - start);
    if (at.size() < 4) timers.RunAfter(absl::Seconds(1), tick);
  };
  timers.RunAfter(absl::Seconds(1), tick);
  timers.Advance(absl::Seconds(10));
  EXPECT_THAT(at, ElementsAre(absl::Seconds(1), absl::Seconds(2),
                              absl::Seconds(3), absl::Seconds(4)));
}

TEST(ManualTimersTest, CancelledAndStoppedTimersNeverRun) {
  ManualClock clock;
  ManualTimers timers(&clock);
  bool ran = false;
  Timers::TimerId id = timers.RunAfter(absl::Seconds(1), [&] { ran = true; });
  EXPECT_TRUE(timers.Cancel(id));
  EXPECT_FALSE(timers.Cancel(id));
  timers.Advance(absl::Seconds(2));
  EXPECT_FALSE(ran);
  timers.RunAfter(absl::Seconds(1), [&] { ran = true; });
  timers.Stop();
  EXPECT_EQ(timers.RunAfter(absl::Seconds(1), [&] { ran = true; }), 0u);
  timers.Advance(absl::Seconds(2));
  EXPECT_FALSE(ran);
}

TEST(ManualTimersTest, WallDeadlinesFollowTheClocksRemainingTime) {
  ManualClock clock;
  const absl::Time deadline = clock.Now() + absl::Seconds(30);
  const absl::Time wall = absl::FromChrono(WallDeadline(clock, deadline));
  EXPECT_LT(absl::AbsDuration(wall - (absl::Now() + absl::Seconds(30))),
            absl::Seconds(5));
  EXPECT_LT(
      absl::AbsDuration(FromWallDeadline(clock, WallDeadline(clock, deadline)) -
                        deadline),
      absl::Seconds(5));
  EXPECT_EQ(WallDeadline(clock, absl::InfiniteFuture()),
            std::chrono::system_clock::time_point::max());
}

}  // namespace
}  // namespace ferry
