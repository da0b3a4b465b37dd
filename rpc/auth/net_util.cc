#include "rpc/auth/net_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
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
