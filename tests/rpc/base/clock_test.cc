// The real clock is monotonic: a step of the wall clock (NTP, an operator)
// moves none of its times, so no deadline, lease or heartbeat moves. Wall
// time enters only at the gRPC boundary (WallDeadline, FromWallDeadline).
#include "rpc/base/clock.h"

#include <chrono>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;

// A RealClock on sources the test steps by hand.
struct SteppedSources {
  absl::Time wall = absl::FromUnixSeconds(1'700'000'000);
  std::chrono::steady_clock::time_point steady;

  RealClockSources sources() {
    return {.wall = [this] { return wall; },
            .steady = [this] { return steady; }};
  }
};

TEST(RealClockTest, AWallClockStepChangesNothing) {
  SteppedSources s;
  RealClock clock(s.sources());
  const absl::Time start = clock.Now();
  EXPECT_EQ(start, s.wall);  // It reads like the wall clock did at start.
  const absl::Time deadline = start + absl::Seconds(10);
  s.wall += absl::Hours(1);  // Stepped forward…
  EXPECT_EQ(clock.Now(), start);
  s.wall -= absl::Hours(2);  // …and back, past where it started.
  EXPECT_EQ(clock.Now(), start);
  // Only steady time moves it: the deadline comes after 10 s of it.
  s.steady += std::chrono::milliseconds(9999);
  EXPECT_LT(clock.Now(), deadline);
  s.steady += std::chrono::milliseconds(1);
  EXPECT_EQ(clock.Now(), deadline);
}

TEST(RealClockTest, TheProcessClockNeverGoesBack) {
  Clock* clock = Clock::Real();
  absl::Time last = clock->Now();
  for (int i = 0; i < 1000; ++i) {
    const absl::Time now = clock->Now();
    EXPECT_GE(now, last);
    last = now;
  }
}

TEST(TimeLeftTest, NeverNegativeAndInfiniteForNoDeadline) {
  ManualClock clock;
  EXPECT_EQ(TimeLeft(clock, clock.Now() + absl::Seconds(3)), absl::Seconds(3));
  EXPECT_EQ(TimeLeft(clock, clock.Now() - absl::Seconds(3)),
            absl::ZeroDuration());
  EXPECT_EQ(TimeLeft(clock, absl::InfiniteFuture()), absl::InfiniteDuration());
}

// A deadline on any clock crosses the gRPC boundary as the same time left
// (within the moment between the two wall readings).
TEST(WallDeadlineTest, RoundTripsThroughTheWallClock) {
  ManualClock clock;  // Far from the wall's time: only the time left counts.
  const absl::Time deadline = clock.Now() + absl::Seconds(30);
  const absl::Time back =
      FromWallDeadline(clock, WallDeadline(clock, deadline));
  EXPECT_LE(absl::AbsDuration(back - deadline), absl::Minutes(1));
  EXPECT_EQ(WallDeadline(clock, absl::InfiniteFuture()),
            std::chrono::system_clock::time_point::max());
  EXPECT_EQ(WallDeadlineIn(absl::InfiniteDuration()),
            std::chrono::system_clock::time_point::max());
  EXPECT_EQ(
      FromWallDeadline(clock, std::chrono::system_clock::time_point::max()),
      absl::InfiniteFuture());
}

}  // namespace
}  // namespace ferry
