#include "rpc/membership/etcd/etcd_status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

bool MessageHas(const grpc::Status& status, absl::string_view text) {
  return absl::StrContains(status.error_message(), text);
}

absl::StatusCode CodeFor(const grpc::Status& status) {
  // etcd answers a wrong password, and a request without a token to a
  // server with auth on, with INVALID_ARGUMENT; what the caller must do is
  // fix its credentials.
  if (MessageHas(status, "etcdserver: authentication failed") ||
      MessageHas(status, "etcdserver: user name is empty") ||
      MessageHas(status, "etcdserver: user name not found")) {
    return absl::StatusCode::kUnauthenticated;
  }
  return static_cast<absl::StatusCode>(status.error_code());
}

}  // namespace

absl::Status EtcdError(const grpc::Status& status, absl::string_view endpoint,
                       absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(CodeFor(status),
                      absl::StrCat("etcd ", endpoint, ": ", what, ": ",
                                   status.error_message()));
}

bool IsStaleToken(const grpc::Status& status) {
  return MessageHas(status, "etcdserver: invalid auth token") ||
         MessageHas(status, "etcdserver: revision of auth store is old");
}

bool IsAuthDisabled(const absl::Status& status) {
  return absl::StrContains(status.message(),
                           "etcdserver: authentication is not enabled");
}

bool NeverApplied(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  // gRPC fails a call this way when it has no connection to send it on
  // (wait_for_ready is off); etcd answers "no leader" before proposing.
  return MessageHas(status, "failed to connect to all addresses") ||
         MessageHas(status, "etcdserver: no leader");
}

bool ShouldFailOver(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    default:
      return false;
  }
}

}  // namespace ferry
