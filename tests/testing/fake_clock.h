// A Clock that only moves when told to: tests step time instead of
// sleeping.
#ifndef FERRY_TESTS_TESTING_FAKE_CLOCK_H_
#define FERRY_TESTS_TESTING_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"

namespace ferry {
namespace testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'000'000))
      : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_FAKE_CLOCK_H_
