// What an op needs of the wire: send one message (a Value) to a peer's
// Mailbox under a key, tell a peer an op failed, forget a dead peer's
// sends. Exchange (exchange.h) is the real one, over gRPC streams; tests
// use an in-process one (tests/collectives/testing/fake_transport.h) that
// speaks the same frames (frames.h) into the receiver's Inbound, stepped by
// hand.
//
// Contract for every implementation:
//  - Send's future completes once the receiver's Mailbox took the whole
//    message (or it was refused for good, or `deadline` passed, or `dst`
//    died: named); a refusal for room (IsBackpressure) is retried, never
//    surfaced, until the deadline.
//  - SendAbort is best effort: nobody waits for it.
//  - After Stop, sends fail at once (UNAVAILABLE) and nothing calls back.
#ifndef FERRY_COLLECTIVES_TRANSPORT_TRANSPORT_H_
#define FERRY_COLLECTIVES_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectives/transport/mailbox.h"
#include "rpc/base/future.h"
#include "rpc/base/trace_context.h"
#include "rpc/value/value.h"

namespace ferry {

class CollectiveTransport {
 public:
  virtual ~CollectiveTransport() = default;

  // Sends `message` to global rank `dst` under `key`, carrying `trace` (if
  // valid). `deadline` is on the worker's timers' clock.
  virtual Future<Done> Send(int dst, const MessageKey& key,
                            const Value& message, absl::Time deadline,
                            const TraceContext& trace) = 0;
  // Tells `dst` that `op` failed with `status`.
  virtual void SendAbort(int dst, const std::string& op,
                         const absl::Status& status, absl::Time deadline) = 0;
  // Fails the sends in flight to `node` (rpc/membership's node ids).
  virtual void FailNode(uint64_t node, const absl::Status& reason) = 0;
  // Drops messages still arriving --mailbox_ttl_ms after they began.
  virtual void ExpireStale() = 0;
  // Cancels everything; waits (bounded) for callbacks in flight.
  virtual void Stop() = 0;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_TRANSPORT_H_
