// Where a job's membership lives, as given on the command line
// (ferryd/ferryctl --rendezvous, env FERRY_RENDEZVOUS):
//   etcd://HOST:PORT[,HOST:PORT…]/JOB
#ifndef FERRY_RPC_MEMBERSHIP_RENDEZVOUS_URL_H_
#define FERRY_RPC_MEMBERSHIP_RENDEZVOUS_URL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

struct EtcdRendezvous {
  std::vector<std::string> endpoints;  // "HOST:PORT", in the given order.
  std::string job;  // [A-Za-z0-9_.-]{1,128}: a component of etcd keys.
};

// INVALID_ARGUMENT naming what is wrong (scheme, endpoints, job name).
absl::StatusOr<EtcdRendezvous> ParseRendezvousUrl(absl::string_view url);

// Whether `job` may name a job in etcd keys.
bool IsValidJobName(absl::string_view job);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_RENDEZVOUS_URL_H_
