// Whether a worker's process is gone, asked of its host instead of waited
// for: a TCP connection to the address the worker listens at. While the
// process lives, its host's kernel accepts the connection (even if the
// process is stopped or busy: the listening socket does); once it is gone,
// the host refuses (a reset: nothing listens there). A host that does not
// answer at all (down, cut off, dropping packets) says nothing either way,
// and the heartbeat decides.
//
// The master asks this when a worker's held poll breaks (rendezvous_service.h)
// so a killed process is named dead within a round trip, not after
// --heartbeat_timeout_ms; gloo learns the same from its sockets' resets.
//
// A refusal is believed only for an address whose host is a numeric IP
// (what workers advertise): a name would need a resolver that may block.
#ifndef FERRY_RPC_MEMBERSHIP_LISTENER_PROBE_H_
#define FERRY_RPC_MEMBERSHIP_LISTENER_PROBE_H_

#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "rpc/base/timers.h"

namespace ferry {

enum class Listener {
  kListening,  // The host accepted a connection: something listens.
  kRefused,    // The host refused it: nothing listens there any more.
  kUnknown,    // No answer within the patience, or no numeric address.
};

class ListenerProbe {
 public:
  using Done = absl::AnyInvocable<void(Listener) &&>;
  virtual ~ListenerProbe() = default;
  // Calls `done` exactly once with what the host of `address` ("ip:port",
  // "[ip6]:port") answered; never on the caller's stack.
  virtual void Probe(const std::string& address, Done done) = 0;
};

// Connects without blocking and looks at the socket on the timers (backing
// off from 2 ms), at most `patience` long. Holds no thread. Once the timers
// stop, a probe still in flight is dropped without calling `done`.
class TcpListenerProbe final : public ListenerProbe {
 public:
  static constexpr absl::Duration kPatience = absl::Seconds(2);

  explicit TcpListenerProbe(Timers* timers, absl::Duration patience = kPatience)
      : timers_(timers), patience_(patience) {}

  void Probe(const std::string& address, Done done) override;

 private:
  Timers* const timers_;
  const absl::Duration patience_;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_LISTENER_PROBE_H_
