// Blocking waits timed by a Timers' clock, so that stepping a test's
// ManualTimers ends them (absl's own waits see only real time).
//
//   // Recv: the message, or DEADLINE_EXCEEDED at the op's deadline.
//   absl::StatusOr<Value> v = AwaitUntil(timers, message, deadline);
//   // A retry's backoff.
//   if (!SleepOn(timers, absl::Milliseconds(100))) return;  // stopping
//
// Each wait is also bounded in real time by the time it has left on the
// clock plus `guard`, in case a timer is lost or nobody steps a manual
// clock. Never call them from a timer callback (on ManualTimers that is the
// thread that would have to step time).
#ifndef FERRY_RPC_BASE_TIMED_WAIT_H_
#define FERRY_RPC_BASE_TIMED_WAIT_H_

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"

namespace ferry {

// The result of `f`, or DEADLINE_EXCEEDED once the timers' clock reached
// `deadline` without it (then `f` stays usable). If the timers are stopped,
// only the real-time bound applies.
template <typename T>
absl::StatusOr<T> AwaitUntil(Timers& timers, const Future<T>& f,
                             absl::Time deadline,
                             absl::Duration guard = absl::Seconds(1)) {
  if (!f.IsReady()) {
    Promise<Done> woken;
    f.Then([woken](const absl::StatusOr<T>&) { woken.Set(Done()); });
    Timers::TimerId timer = 0;
    if (deadline != absl::InfiniteFuture()) {
      timer = timers.RunAt(deadline, [woken] { woken.Set(Done()); });
    }
    woken.future()
        .Wait(TimeLeft(*timers.clock(), deadline) + guard)
        .IgnoreError();
    if (timer != 0) timers.Cancel(timer);
  }
  if (f.IsReady()) return f.Wait(absl::ZeroDuration());
  return absl::DeadlineExceededError(absl::StrCat(
      "no result by the deadline (",
      absl::FormatDuration(deadline - timers.clock()->Now()), " left)"));
}

// Returns true once `delay` passed on the timers' clock (or, at the
// latest, `delay + guard` in real time); false at once if the timers are
// stopped, so a caller's loop ends then.
bool SleepOn(Timers& timers, absl::Duration delay,
             absl::Duration guard = absl::Seconds(1));

}  // namespace ferry

#endif  // FERRY_RPC_BASE_TIMED_WAIT_H_
