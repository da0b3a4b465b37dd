// A clock and timers that move only when a test says so: protocol tests
// step time by hand instead of sleeping, and timer callbacks run on the
// test's own thread, in order, during Advance.
//
//   ManualClock clock;
//   ManualTimers timers(&clock);
//   timers.RunAfter(absl::Seconds(3), [&] { expired = true; });
//   timers.Advance(absl::Seconds(2));   // nothing yet
//   timers.Advance(absl::Seconds(1));   // runs the callback
#ifndef FERRY_TESTS_TESTING_MANUAL_CLOCK_H_
#define FERRY_TESTS_TESTING_MANUAL_CLOCK_H_

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"
#include "rpc/base/timers.h"

namespace ferry {
namespace testing {

class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'000'000))
      : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  // Moves time on (without running any timer: see ManualTimers::Advance).
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

class ManualTimers final : public Timers {
 public:
  explicit ManualTimers(ManualClock* clock) : clock_(clock) {}

  Clock* clock() const override { return clock_; }
  TimerId RunAt(absl::Time when, Callback cb) override {
    absl::MutexLock lock(&mu_);
    if (stopped_) return 0;
    return queue_.Add(when, std::move(cb));
  }
  bool Cancel(TimerId id) override {
    Callback dropped;
    absl::MutexLock lock(&mu_);
    dropped = queue_.Remove(id);
    return dropped != nullptr;
  }
  void Stop() override {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    queue_.TakeAll();
  }

  // Moves the clock on by `d`, stopping at each timer's time to run it
  // (timers its callbacks add are run too if due within `d`).
  void Advance(absl::Duration d) {
    const absl::Time end = clock_->Now() + d;
    while (RunNextBefore(end)) {
    }
    clock_->Set(end);
  }
  // Runs what is due now.
  void RunDue() { Advance(absl::ZeroDuration()); }
  bool has_pending() const {
    absl::MutexLock lock(&mu_);
    return !queue_.empty();
  }

 private:
  bool RunNextBefore(absl::Time end) {
    Callback cb;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty() || queue_.next() > end) return false;
      clock_->Set(std::max(clock_->Now(), queue_.next()));
      cb = queue_.PopDue(clock_->Now());
    }
    if (cb != nullptr) std::move(cb)();
    return true;
  }

  ManualClock* const clock_;
  mutable absl::Mutex mu_;
  TimerQueue queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_MANUAL_CLOCK_H_
