// Waiting in tests for what a worker's membership hears: on its events
// (rpc/membership/membership_events.h, long polls that answer when an event is
// recorded), never by sleeping and looking again.
//
//   worker(2).Stop();
//   ASSERT_TRUE(AwaitGone(worker(0).rpc().events(), 2, absl::Seconds(20)));
#ifndef FERRY_TESTS_TESTING_MEMBERSHIP_WAITS_H_
#define FERRY_TESTS_TESTING_MEMBERSHIP_WAITS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/membership/membership_events.h"

namespace ferry::testing {

// The events `events` recorded, from the first kept, up to and including
// the first that `want` matches; empty if none came within `timeout`.
inline std::vector<MembershipEvent> AwaitEvent(
    MembershipEvents& events,
    const std::function<bool(const MembershipEvent&)>& want,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<MembershipEvent> seen;
  int64_t after = 0;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<MembershipEvent>> got =
        events.Poll(after, deadline - absl::Now()).Wait(timeout);
    if (!got.ok()) break;
    for (const MembershipEvent& e : *got) {
      seen.push_back(e);
      after = e.seq;
      if (want(e)) return seen;
    }
  }
  return {};
}

// Whether `events` recorded, within `timeout`, that worker `rank` died or
// left.
inline bool AwaitGone(MembershipEvents& events, int rank,
                      absl::Duration timeout) {
  return !AwaitEvent(
              events,
              [rank](const MembershipEvent& e) {
                return e.rank == rank && (e.kind == "died" || e.kind == "left");
              },
              timeout)
              .empty();
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_MEMBERSHIP_WAITS_H_
