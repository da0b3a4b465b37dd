// How an EtcdClient reaches etcd: endpoints, security, deadlines.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_OPTIONS_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"

namespace ferry {

class Timers;

struct EtcdOptions {
  // Members' client addresses, "HOST:PORT" (see ParseEtcdEndpoints). Calls
  // go to one of them at a time and move to the next when it fails.
  std::vector<std::string> endpoints;

  // TLS: a CA alone authenticates the server; with a certificate and key
  // the client authenticates too (etcd's --client-cert-auth). Empty CA:
  // plaintext. PEM file paths.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;

  // etcd user and password; empty user: no authentication. The token
  // etcd hands out is renewed whenever etcd calls it invalid. Sent in the
  // clear only to loopback endpoints: others need TLS.
  std::string user;
  std::string password;

  // Connect() gives up after this long without a healthy endpoint.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Each call's deadline, retries and failovers included.
  absl::Duration call_timeout = absl::Seconds(5);
  // Pauses between attempts after every endpoint failed: the first, then
  // doubled up to the max. Also how soon a broken stream is reopened.
  absl::Duration retry_backoff = absl::Milliseconds(50);
  absl::Duration max_retry_backoff = absl::Seconds(1);

  // Where deadlines and lease expiries are computed. Not owned.
  Clock* clock = Clock::Real();
  // Runs renewals, retries and reopenings; null: the client runs its own.
  // Not owned; must outlive the client.
  Timers* timers = nullptr;
};

// Parses "HOST:PORT[,HOST:PORT…]" (IPv6 hosts in brackets). INVALID_ARGUMENT
// names the bad entry.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    absl::string_view list);

// Whether a "HOST:PORT" endpoint is on this machine's loopback
// (127.0.0.0/8, [::1], localhost).
bool IsLoopbackEndpoint(absl::string_view endpoint);

// INVALID_ARGUMENT naming the problem: no endpoints, bad endpoints,
// durations not positive, a TLS certificate without key or CA, a password
// that would cross the network unencrypted.
absl::Status ValidateEtcdOptions(const EtcdOptions& options);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_OPTIONS_H_
