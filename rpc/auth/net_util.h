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

// Parses "host:port" or "[v6]:port". INVALID_ARGUMENT names the address;
// an IPv6 host must be in brackets ("::1:80" could be either).
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// "host:port", bracketing IPv6 hosts.
std::string JoinHostPort(absl::string_view host, int port);

// Whether `host` is this machine's loopback interface, by address, not by
// spelling: an IPv4 literal in 127.0.0.0/8, ::1, an IPv4-mapped
// ::ffff:127.x.y.z, or "localhost" if every address it resolves to is one
// of those. Any other name is not (what it resolves to when dialled may
// differ): "127.0.0.1.example.com" is not loopback.
bool IsLoopbackHost(absl::string_view host);
// Whether every address gRPC dials for `target` is loopback: "host:port",
// "dns:host:port" or "dns:///host:port" (no other DNS authority), or a
// list "ipv4:a:p,b:p" / "ipv6:[a]:p,…" whose every entry is. Anything else
// (other schemes, a malformed target) is not.
bool IsLoopbackTarget(absl::string_view target);
bool IsWildcardHost(absl::string_view host);

// This machine's host name (for same-host detection).
std::string LocalHostName();

// The local IP address this machine uses to reach `peer_host` (how peers
// can reach us), or the host name if that cannot be determined.
std::string LocalAddressFacing(const std::string& peer_host);

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_NET_UTIL_H_
