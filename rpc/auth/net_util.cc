#include "rpc/auth/net_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ferry {

std::string LocalHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", address, "': ", why, " (expected host:port)"));
  };
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return bad("no port");
  HostPort hp;
  hp.host = std::string(address.substr(0, colon));
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  } else if (hp.host.find_first_of(":[]") != std::string::npos) {
    return bad("an IPv6 host must be in brackets, [host]:port");
  }
  if (!absl::SimpleAtoi(address.substr(colon + 1), &hp.port) || hp.port < 0 ||
      hp.port > 65535) {
    return bad("invalid port");
  }
  return hp;
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

namespace {

bool IsLoopbackAddress(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family != AF_INET6) return false;
  const in6_addr& v6 =
      reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  // ::ffff:127.x.y.z reaches 127.x.y.z.
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

// An IP literal's address (no name resolution); false if `host` is none.
bool ParseIp(const std::string& host, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    return true;
  }
  return false;
}

bool IsLoopbackLiteral(absl::string_view host) {
  sockaddr_storage address;
  return ParseIp(std::string(host), &address) &&
         IsLoopbackAddress(reinterpret_cast<const sockaddr*>(&address));
}

// "localhost" by what it resolves to: every address loopback.
bool LocalhostIsLoopback() {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo("localhost", nullptr, &hints, &res) != 0) return false;
  bool loopback = res != nullptr;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    loopback = loopback && IsLoopbackAddress(a->ai_addr);
  }
  freeaddrinfo(res);
  return loopback;
}

// One "host:port" of a target; `literal_only` for the ipv4:/ipv6: lists,
// whose entries gRPC never resolves.
bool IsLoopbackEntry(absl::string_view entry, bool literal_only) {
  absl::StatusOr<HostPort> hp = ParseHostPort(entry);
  if (!hp.ok()) return false;
  if (IsLoopbackLiteral(hp->host)) return true;
  return !literal_only && absl::EqualsIgnoreCase(hp->host, "localhost") &&
         LocalhostIsLoopback();
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  if (IsLoopbackLiteral(host)) return true;
  return absl::EqualsIgnoreCase(host, "localhost") && LocalhostIsLoopback();
}

bool IsLoopbackTarget(absl::string_view target) {
  if (absl::ConsumePrefix(&target, "ipv4:") ||
      absl::ConsumePrefix(&target, "ipv6:")) {
    // Every address of the list may be dialled.
    for (absl::string_view entry : absl::StrSplit(target, ',')) {
      if (!IsLoopbackEntry(entry, /*literal_only=*/true)) return false;
    }
    return true;
  }
  if (absl::ConsumePrefix(&target, "dns:")) {
    // "dns:///host:port" or "dns:host:port"; another authority is another
    // DNS server, whose answers this process does not see.
    if (absl::ConsumePrefix(&target, "//") &&
        !absl::ConsumePrefix(&target, "/")) {
      return false;
    }
  } else if (absl::StrContains(target, "://") ||
             absl::StartsWith(target, "unix") ||
             absl::StartsWith(target, "xds:") ||
             absl::StartsWith(target, "google-c2p")) {
    return false;  // Another resolver: not a host and port.
  }
  return IsLoopbackEntry(target, /*literal_only=*/false);
}

bool IsWildcardHost(absl::string_view host) {
  return host == "0.0.0.0" || host == "::" || host.empty();
}

std::string LocalAddressFacing(const std::string& peer_host) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(peer_host.c_str(), "9", &hints, &res) != 0 ||
      res == nullptr) {
    return LocalHostName();
  }
  std::string out = LocalHostName();
  int fd = socket(res->ai_family, SOCK_DGRAM, 0);
  // Connecting a UDP socket sends nothing; it only picks the route.
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage local;
    socklen_t len = sizeof(local);
    char buf[INET6_ADDRSTRLEN] = {0};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr =
          local.ss_family == AF_INET
              ? static_cast<const void*>(
                    &reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(
                    &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, addr, buf, sizeof(buf)) != nullptr)
        out = buf;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return out;
}

}  // namespace ferry
