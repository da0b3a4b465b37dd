// Timers: run callbacks at given times on a Clock — heartbeats, retries
// with backoff, deadlines, leases, sleep_ms. Callbacks run outside any lock,
// one at a time; keep them short and hand real work to an Executor.
//
// ThreadTimers runs them on a thread of its own against a real clock;
// tests use ManualTimers (tests/testing/manual_clock.h), which runs them
// when the test advances its clock, on the test's thread.
#ifndef FERRY_RPC_BASE_TIMERS_H_
#define FERRY_RPC_BASE_TIMERS_H_

#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"

namespace ferry {

class Timers {
 public:
  using TimerId = uint64_t;
  using Callback = absl::AnyInvocable<void() &&>;

  virtual ~Timers() = default;

  // The clock the timers' times are on.
  virtual Clock* clock() const = 0;

  // Runs `cb` at (or soon after) `when` on clock(). After Stop() the
  // callback is dropped and 0 returned.
  virtual TimerId RunAt(absl::Time when, Callback cb) = 0;
  TimerId RunAfter(absl::Duration delay, Callback cb) {
    return RunAt(clock()->Now() + delay, std::move(cb));
  }

  // True if the timer was pending and will now never run.
  virtual bool Cancel(TimerId id) = 0;

  // Drops pending callbacks and waits for a running one. Must not be
  // called from a timer callback.
  virtual void Stop() = 0;
};

// The queue of pending timers, ordered by (time, id) so equal times run in
// submission order. Not thread-safe: its owner locks.
class TimerQueue {
 public:
  using TimerId = Timers::TimerId;
  using Callback = Timers::Callback;

  TimerId Add(absl::Time when, Callback cb);
  // The callback of a pending timer, removed; empty if not pending.
  Callback Remove(TimerId id);
  bool empty() const { return queue_.empty(); }
  absl::Time next() const { return queue_.begin()->first.first; }
  // Removes and returns the first callback if it is due at `now`.
  Callback PopDue(absl::Time now);
  // Everything pending, removed (to be destroyed outside the owner's lock).
  std::map<std::pair<absl::Time, TimerId>, Callback> TakeAll();

 private:
  std::map<std::pair<absl::Time, TimerId>, Callback> queue_;
  absl::flat_hash_map<TimerId, absl::Time> when_;
  TimerId next_id_ = 1;
};

// Timers on a thread of their own.
class ThreadTimers final : public Timers {
 public:
  // `clock` must be a real clock (the thread sleeps until its times).
  explicit ThreadTimers(Clock* clock = Clock::Real());
  // Stops; pending callbacks are dropped.
  ~ThreadTimers() override;

  ThreadTimers(const ThreadTimers&) = delete;
  ThreadTimers& operator=(const ThreadTimers&) = delete;

  Clock* clock() const override { return clock_; }
  TimerId RunAt(absl::Time when, Callback cb) override ABSL_LOCKS_EXCLUDED(mu_);
  bool Cancel(TimerId id) override ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // The next callback once it is due, or an empty one when stopping.
  Callback NextDue() ABSL_LOCKS_EXCLUDED(mu_);

  Clock* const clock_;
  absl::Mutex mu_;
  TimerQueue queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // When the thread next looks at the queue by itself: the end of its
  // wait, or InfinitePast while it runs callbacks (it looks before waiting
  // again).
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::CondVar wake_;
  std::thread thread_;
};

}  // namespace ferry

#endif  // FERRY_RPC_BASE_TIMERS_H_
