#include "rpc/membership/listener_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "rpc/auth/net_util.h"

namespace ferry {
namespace {

// One connection being made; its socket closes with it, also when the
// timers drop it unrun.
struct Attempt {
  ~Attempt() {
    if (fd >= 0) close(fd);
  }
  int fd = -1;
  ListenerProbe::Done done;
  absl::Time give_up;
  absl::Duration wait = absl::Milliseconds(2);
};

Listener OfError(int error) {
  if (error == 0) return Listener::kListening;
  // Only a refusal says "gone": unreachable networks, timeouts and the rest
  // say something of the path, not of the process.
  return error == ECONNREFUSED ? Listener::kRefused : Listener::kUnknown;
}

// Starts connecting to `address` on `*fd`: the answer if it is known at
// once, nullopt while the connection is in flight.
std::optional<Listener> Connect(const std::string& address, int* fd) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok() || hp->port <= 0 || hp->port > 65535) return Listener::kUnknown;
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, hp->host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(hp->port));
    length = sizeof(*v4);
  } else if (inet_pton(AF_INET6, hp->host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(hp->port));
    length = sizeof(*v6);
  } else {
    return Listener::kUnknown;  // A name: resolving it could block.
  }
  *fd =
      socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (*fd < 0) return Listener::kUnknown;
  if (connect(*fd, reinterpret_cast<sockaddr*>(&storage), length) == 0) {
    return Listener::kListening;
  }
  if (errno == EINPROGRESS) return std::nullopt;
  return OfError(errno);
}

void Answer(Timers* timers, ListenerProbe::Done done, Listener answer) {
  timers->RunAfter(
      absl::ZeroDuration(),
      [done = std::move(done), answer]() mutable { std::move(done)(answer); });
}

// Looks whether the connection was answered; else looks again later (the
// waits doubling to 200 ms) until the attempt gives up.
void Look(Timers* timers, std::unique_ptr<Attempt> attempt) {
  pollfd p{};
  p.fd = attempt->fd;
  p.events = POLLOUT;
  const int ready = poll(&p, 1, 0);
  if (ready > 0) {
    int error = 0;
    socklen_t size = sizeof(error);
    if (getsockopt(attempt->fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
      error = errno;
    }
    return std::move(attempt->done)(OfError(error));
  }
  if ((ready < 0 && errno != EINTR) ||
      timers->clock()->Now() >= attempt->give_up) {
    return std::move(attempt->done)(Listener::kUnknown);
  }
  const absl::Duration wait = attempt->wait;
  attempt->wait = std::min(attempt->wait * 2, absl::Milliseconds(200));
  timers->RunAfter(wait, [timers, attempt = std::move(attempt)]() mutable {
    Look(timers, std::move(attempt));
  });
}

}  // namespace

void TcpListenerProbe::Probe(const std::string& address, Done done) {
  auto attempt = std::make_unique<Attempt>();
  if (std::optional<Listener> now = Connect(address, &attempt->fd)) {
    return Answer(timers_, std::move(done), *now);
  }
  attempt->done = std::move(done);
  attempt->give_up = timers_->clock()->Now() + patience_;
  timers_->RunAfter(attempt->wait,
                    [timers = timers_, attempt = std::move(attempt)]() mutable {
                      Look(timers, std::move(attempt));
                    });
}

}  // namespace ferry
