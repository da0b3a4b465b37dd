// One change in a job's membership, as one worker saw it: what a
// program's OnMembershipChange callback receives
// (rpc/membership/membership_events.h keeps, numbers and delivers them).
#ifndef FERRY_RPC_MEMBERSHIP_MEMBERSHIP_EVENT_H_
#define FERRY_RPC_MEMBERSHIP_MEMBERSHIP_EVENT_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace ferry {

struct MembershipEvent {
  int64_t seq = 0;   // This worker's number for it, from 1.
  std::string kind;  // "died", "left", "replaced", "revoked"
  int rank = -1;     // The worker it is about; -1 for "revoked".
  std::string worker;
  std::string group;   // "revoked": the group's name.
  std::string detail;  // The cause, the new address, who revoked and why.
  absl::Time time;     // Wall clock, for people.
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_MEMBERSHIP_EVENT_H_
