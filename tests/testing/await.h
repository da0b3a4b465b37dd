// Waiting in tests for state that has no event to wait on (a counter a
// status reports, say): `AwaitTrue` looks at `condition` every
// millisecond (or `every`: a condition that is itself a call, or a retry)
// until it holds or `timeout` passed. Prefer an event where
// the code has one (membership_waits.h); never sleep a fixed time and
// hope the other side got there.
//
//   ASSERT_TRUE(AwaitTrue([&] { return agent.Status().prejoin_calls() == 1; },
//                         absl::Seconds(30)));
#ifndef FERRY_TESTS_TESTING_AWAIT_H_
#define FERRY_TESTS_TESTING_AWAIT_H_

#include <functional>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry::testing {

// Whether `condition` held within `timeout` (real time: what it waits for
// is another thread's or process's progress).
inline bool AwaitTrue(const std::function<bool()>& condition,
                      absl::Duration timeout,
                      absl::Duration every = absl::Milliseconds(1)) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Notification never;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    never.WaitForNotificationWithTimeout(every);
  }
  return true;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_AWAIT_H_
