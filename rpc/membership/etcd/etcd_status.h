// What etcd's answers mean for the client: how to turn a gRPC status from
// etcd into ferry's absl::Status (naming the endpoint and the operation),
// and which failures call for a new token, another endpoint or a retry.
// etcd 3.4 tells its errors apart by message (etcdserver/api/v3rpc/
// rpctypes); the messages matched here are that package's.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_STATUS_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace ferry {

// `status` as an absl::Status whose message reads
// "etcd ENDPOINT: WHAT: etcd's message". Codes map 1:1, except that etcd's
// authentication failures (wrong password, no user, which it answers
// INVALID_ARGUMENT) become UNAUTHENTICATED.
absl::Status EtcdError(const grpc::Status& status, absl::string_view endpoint,
                       absl::string_view what);

// etcd no longer accepts the token (expired, or the auth store changed):
// authenticate again, then retry.
bool IsStaleToken(const grpc::Status& status);

// etcd has authentication off (the answer to Authenticate then).
bool IsAuthDisabled(const absl::Status& status);

// The request never reached etcd's state machine (no connection could be
// made, or the member refused it for want of a leader): any call, even a
// write, may be retried elsewhere.
bool NeverApplied(const grpc::Status& status);

// The endpoint is unusable for now (down, unreachable, without leader, or
// too slow): later calls should go to another one.
bool ShouldFailOver(const grpc::Status& status);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_STATUS_H_
