// Time, through one seam (as leveldb's Env::NowMicros): deadlines, leases,
// heartbeats and timers read a Clock, so tests step time by hand
// (tests/testing/manual_clock.h) instead of sleeping.
//
// The real clock is monotonic: a step of the wall clock (NTP, an operator)
// moves no deadline, lease or heartbeat. Its times are absl::Time values
// that start out equal to the wall clock, so they read well in logs, but
// only steady time moves them. Wall time is used only in log lines and at
// the gRPC boundary, whose deadlines are wall-clock time points: convert
// with WallDeadline and FromWallDeadline (or WallDeadlineIn for a bare
// timeout).
#ifndef FERRY_RPC_BASE_CLOCK_H_
#define FERRY_RPC_BASE_CLOCK_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

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

// Where a RealClock's time comes from (tests pass their own to step each).
struct RealClockSources {
  // Read for log lines and the gRPC boundary: wall time.
  std::function<absl::Time()> wall = [] { return absl::Now(); };
  std::function<std::chrono::steady_clock::time_point()> steady = [] {
    return std::chrono::steady_clock::now();
  };
};

// Steady time, offset to read as the wall clock did at construction.
class RealClock final : public Clock {
 public:
  // Reads the wall clock once, here; from then on only steady time counts.
  explicit RealClock(RealClockSources sources = {})
      : steady_(std::move(sources.steady)),
        start_wall_(sources.wall()),
        start_steady_(steady_()) {}

  absl::Time Now() const override {
    return start_wall_ + absl::FromChrono(steady_() - start_steady_);
  }

 private:
  const std::function<std::chrono::steady_clock::time_point()> steady_;
  const absl::Time start_wall_;
  const std::chrono::steady_clock::time_point start_steady_;
};

inline Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

// What is left until `deadline` on `clock`, as a timeout for a blocking
// wait (absl's waits take durations): never negative, infinite for an
// infinite deadline.
inline absl::Duration TimeLeft(const Clock& clock, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return absl::InfiniteDuration();
  return std::max(deadline - clock.Now(), absl::ZeroDuration());
}

// The wall-clock time point (for a gRPC deadline) that is as far from now
// as `deadline` is on `clock`. An infinite deadline stays infinite. The
// wall clock is read here, at the boundary, so a step of it before this
// call moves nothing (gRPC turns the deadline back into a timeout at once).
inline std::chrono::system_clock::time_point WallDeadline(const Clock& clock,
                                                          absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    return std::chrono::system_clock::time_point::max();
  }
  // The gRPC boundary: wall time by gRPC's contract.
  return absl::ToChronoTime(absl::Now() + (deadline - clock.Now()));
}

// The wall-clock time point (for a gRPC deadline) `timeout` from now. An
// infinite timeout gives no deadline.
inline std::chrono::system_clock::time_point WallDeadlineIn(
    absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) {
    return std::chrono::system_clock::time_point::max();
  }
  // The gRPC boundary: wall time by gRPC's contract.
  return absl::ToChronoTime(absl::Now() + timeout);
}

// The time on `clock` of a wall-clock deadline (a call's gRPC deadline, as
// gRPC reports it): as far from clock.Now() as it is from the wall's now.
inline absl::Time FromWallDeadline(const Clock& clock,
                                   std::chrono::system_clock::time_point wall) {
  if (wall == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  // The gRPC boundary: wall time by gRPC's contract.
  return clock.Now() + (absl::FromChrono(wall) - absl::Now());
}

}  // namespace ferry

#endif  // FERRY_RPC_BASE_CLOCK_H_
