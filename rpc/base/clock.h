// Time source, injectable so lease and timeout logic can be tested by
// advancing time instead of sleeping (see tests/testing/fake_clock.h).
#ifndef FERRY_RPC_BASE_CLOCK_H_
#define FERRY_RPC_BASE_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real clock.
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

}  // namespace ferry

#endif  // FERRY_RPC_BASE_CLOCK_H_
