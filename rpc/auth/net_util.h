// Small helpers for host:port addresses.
#ifndef FERRY_RPC_AUTH_NET_UTIL_H_
#define FERRY_RPC_AUTH_NET_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

struct HostPort {
  std::string host;  // Without brackets for IPv6.
  int port = 0;
};

// Parses "host:port" or "[v6]:port". INVALID_ARGUMENT names the address.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// "host:port", bracketing IPv6 hosts.
std::string JoinHostPort(absl::string_view host, int port);

bool IsLoopbackHost(absl::string_view host);
bool IsWildcardHost(absl::string_view host);

// This machine's host name (for same-host detection).
std::string LocalHostName();

// The local IP address this machine uses to reach `peer_host` (how peers
// can reach us), or the host name if that cannot be determined.
std::string LocalAddressFacing(const std::string& peer_host);

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_NET_UTIL_H_
