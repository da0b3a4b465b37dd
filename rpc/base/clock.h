// Time, through one seam (as leveldb's Env::NowMicros): deadlines, leases,
// heartbeats and timers read a Clock, so tests step time by hand
// (tests/testing/manual_clock.h) instead of sleeping. gRPC's deadlines are
// wall-clock; convert with WallDeadline and FromWallDeadline.
#ifndef FERRY_RPC_BASE_CLOCK_H_
#define FERRY_RPC_BASE_CLOCK_H_

#include <chrono>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide monotonic clock.
  static Clock* Real();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

inline Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

// The wall-clock time point (for a gRPC deadline) that is as far from now
// as `deadline` is on `clock`. An infinite deadline stays infinite.
inline std::chrono::system_clock::time_point WallDeadline(const Clock& clock,
                                                          absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    return std::chrono::system_clock::time_point::max();
  }
  return absl::ToChronoTime(absl::Now() + (deadline - clock.Now()));
}

// The time on `clock` of a wall-clock deadline (a call's gRPC deadline).
inline absl::Time FromWallDeadline(const Clock& clock,
                                   std::chrono::system_clock::time_point wall) {
  if (wall == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return clock.Now() + (absl::FromChrono(wall) - absl::Now());
}

}  // namespace ferry

#endif  // FERRY_RPC_BASE_CLOCK_H_
