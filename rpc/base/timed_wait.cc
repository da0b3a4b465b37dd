#include "rpc/base/timed_wait.h"

#include <memory>

#include "absl/synchronization/notification.h"

namespace ferry {

bool SleepOn(Timers& timers, absl::Duration delay, absl::Duration guard) {
  // Shared with the timer, which may run after a wait that gave up.
  auto woken = std::make_shared<absl::Notification>();
  if (timers.RunAfter(delay, [woken] { woken->Notify(); }) == 0) return false;
  woken->WaitForNotificationWithTimeout(delay + guard);
  return true;
}

}  // namespace ferry
