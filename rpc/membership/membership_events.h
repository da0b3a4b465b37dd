// What changed in a job's membership, as one worker saw it: deaths and
// departures (with the cause), replacements joining, groups revoked. A
// program subscribes (C++ callbacks; Python's ferry.on_membership_change);
// operators watch (`ferryctl watch`, which long-polls the builtin
// "ferry.membership_events" through Poll).
//
//   int64_t id = agent.events().Subscribe([](const MembershipEvent& e) {
//     if (e.kind == "died") Revoke(world, e.detail);
//   });
//   …
//   agent.events().Unsubscribe(id);
//
// Each worker numbers its events 1, 2, … and keeps the last kKept of them,
// so a watcher that polls with the last number it saw misses nothing that
// recent. Subscribers run outside the lock, on the thread that recorded the
// event (a membership listener, a call handler); they must not block.
#ifndef FERRY_RPC_MEMBERSHIP_MEMBERSHIP_EVENTS_H_
#define FERRY_RPC_MEMBERSHIP_MEMBERSHIP_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/membership/membership_event.h"
#include "rpc/value/value.h"

namespace ferry {

class Timers;  // rpc/base/timers.h

// {"seq","event","rank","worker","group","detail","time"} ("group" only
// for revocations; "time" RFC 3339).
Value EventValue(const MembershipEvent& event);

class MembershipEvents {
 public:
  static constexpr size_t kKept = 1024;
  // Polls waiting at once, at most (each holds a timer until it answers).
  static constexpr size_t kMaxPolls = 256;
  using Subscriber = std::function<void(const MembershipEvent&)>;

  explicit MembershipEvents(Timers* timers) : timers_(timers) {}
  ~MembershipEvents();

  // Calls `fn` with each event recorded from now on; returns its id.
  int64_t Subscribe(Subscriber fn) ABSL_LOCKS_EXCLUDED(mu_);
  void Unsubscribe(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Numbers `event`, keeps it, tells subscribers and waiting polls.
  void Record(MembershipEvent event) ABSL_LOCKS_EXCLUDED(mu_);

  // The kept events numbered above `after`, oldest first.
  std::vector<MembershipEvent> Since(int64_t after) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The last number given (0 before any).
  int64_t last() const ABSL_LOCKS_EXCLUDED(mu_);

  // The kept events above `after`: at once if there are some, else once
  // the next is recorded, else (empty) after `wait`. RESOURCE_EXHAUSTED
  // past kMaxPolls waiting; UNAVAILABLE after Stop.
  Future<std::vector<MembershipEvent>> Poll(int64_t after, absl::Duration wait)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Answers waiting polls (empty) and takes no more.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiting {
    int64_t after;
    Promise<std::vector<MembershipEvent>> answer;
    uint64_t timer = 0;  // A Timers::TimerId.
  };
  std::vector<MembershipEvent> SinceLocked(int64_t after) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void TimeOut(int64_t poll) ABSL_LOCKS_EXCLUDED(mu_);

  Timers* const timers_;
  mutable absl::Mutex mu_;
  int64_t last_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<MembershipEvent> kept_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Waiting> polls_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_MEMBERSHIP_EVENTS_H_
