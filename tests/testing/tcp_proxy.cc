#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace testing {

namespace {

absl::StatusOr<sockaddr_in> Resolve(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &port) ||
      inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) !=
          1) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an IPv4 HOST:PORT: ", host_port));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

int ConnectTo(const sockaddr_in& addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(
    const std::string& upstream) {
  absl::StatusOr<sockaddr_in> target = Resolve(upstream);
  if (!target.ok()) return target.status();
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // Picked.
  socklen_t len = sizeof(addr);
  if (listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 64) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listener >= 0) close(listener);
    return absl::UnavailableError(
        absl::StrCat("tcp proxy: cannot listen: ", std::strerror(errno)));
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::string address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  return std::unique_ptr<TcpProxy>(
      new TcpProxy(listener, wake, std::move(address), upstream));
}

TcpProxy::TcpProxy(int listener, int wake, std::string address,
                   std::string upstream)
    : listener_(listener),
      wake_(wake),
      address_(std::move(address)),
      upstream_(std::move(upstream)) {
  thread_ = std::thread([this] { Loop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  Wake();
  thread_.join();
  for (const Pair& p : pairs_) {
    close(p.client);
    close(p.upstream);
  }
  for (int fd : held_) close(fd);
  close(listener_);
  close(wake_);
}

void TcpProxy::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_, &one, sizeof(one));
}

void TcpProxy::Cut() {
  cut_ = true;
  Wake();
}

void TcpProxy::Accept() {
  int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  ++accepted_;
  if (cut_) {
    held_.push_back(client);
    return;
  }
  absl::StatusOr<sockaddr_in> target = Resolve(upstream_);
  int upstream = target.ok() ? ConnectTo(*target) : -1;
  if (upstream < 0) {
    close(client);
    return;
  }
  int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  pairs_.push_back({client, upstream});
}

bool TcpProxy::Forward(int from, int to) {
  char buffer[64 * 1024];
  const ssize_t n = read(from, buffer, sizeof(buffer));
  if (n <= 0) return false;
  for (ssize_t sent = 0; sent < n;) {
    const ssize_t w = send(to, buffer + sent, n - sent, MSG_NOSIGNAL);
    if (w <= 0) return false;
    sent += w;
  }
  return true;
}

void TcpProxy::Loop() {
  while (!stopping_) {
    // Once cut, the pairs are not polled: what they send stays unread.
    const bool cut = cut_;
    std::vector<pollfd> fds = {{wake_, POLLIN, 0}, {listener_, POLLIN, 0}};
    if (!cut) {
      for (const Pair& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.upstream, POLLIN, 0});
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents != 0) {
      uint64_t drained;
      (void)!read(wake_, &drained, sizeof(drained));
    }
    if (fds[1].revents & POLLIN) Accept();
    if (cut) continue;
    std::vector<Pair> open;
    for (size_t i = 0; i < fds.size() - 2 && i / 2 < pairs_.size(); i += 2) {
      const Pair& p = pairs_[i / 2];
      bool alive = true;
      if (fds[2 + i].revents != 0) alive = Forward(p.client, p.upstream);
      if (alive && fds[3 + i].revents != 0) {
        alive = Forward(p.upstream, p.client);
      }
      if (alive) {
        open.push_back(p);
      } else {
        close(p.client);
        close(p.upstream);
      }
    }
    // Pairs accepted during this round were not polled: keep them.
    for (size_t k = (fds.size() - 2) / 2; k < pairs_.size(); ++k) {
      open.push_back(pairs_[k]);
    }
    pairs_ = std::move(open);
  }
}

}  // namespace testing
}  // namespace ferry
