// The transport of collectives: sends one message (a Value) to a peer as a
// stream of frames, and receives others' into the Mailbox
// (proto/collectives.proto has the framing).
//
// Sending holds no thread. A message the receiver cannot buffer yet is
// retried with backoff until the deadline (backpressure); a peer that dies
// fails its sends at once, naming it. A message over the largest the
// mailbox takes (--max_mailbox_mb) fails at once, here.
//
// A message of one frame of at most `standing_bytes` goes on the standing
// stream to its receiver (standing_stream.h: one per peer, opened on first
// use, every op's), larger ones on a stream of their own, so they never
// hold small ones up. Either way it is answered the same.
//
// A send completes when its receiver answered that it took the message,
// or, as gloo's does once written, when the message was written out whole
// and the receiver's process is gone before answering (its host refuses
// connections where it listened: listener_probe.h): a rank may exit right
// after its last receive. Otherwise a stream's end fails what it carried.
//
// Receiving: each stream feeds one Inbound (inbound.h has the protocol as
// enforced against a hostile sender); a standing stream one per frame.
// ExpireStale drops messages that did not arrive whole within
// --mailbox_ttl_ms.
#ifndef FERRY_COLLECTIVES_TRANSPORT_EXCHANGE_H_
#define FERRY_COLLECTIVES_TRANSPORT_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/transport/inbound.h"
#include "collectives/transport/mailbox.h"
#include "collectives/transport/standing_stream.h"
#include "collectives/transport/transport.h"
#include "grpcpp/generic/async_generic_service.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"
#include "rpc/base/trace_context.h"
#include "rpc/channels.h"
#include "rpc/generic_stubs.h"
#include "rpc/inflight.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/listener_probe.h"
#include "rpc/membership/membership.h"
#include "rpc/peer_budget.h"

namespace ferry {

class Exchange final : public CollectiveTransport,
                       public grpc::CallbackGenericService {
 public:
  static constexpr char kMethod[] = "/ferry.proto.Collectives/Exchange";

  struct Options {
    // CollectiveConfig's (collectives/transport/config.h) say why these sizes.
    int64_t chunk_bytes = (1 << 20) + (64 << 10);
    // Messages of one frame and at most this many payload bytes go on the
    // standing stream; 0: none.
    int64_t standing_bytes = (1 << 20) + (64 << 10);
    int world_size = 1;
    // How long a message may take to arrive whole (--mailbox_ttl_ms), on
    // the timers' clock.
    int64_t ttl_ms = 60000;
    // Optional: who a stream is. Then frames come only from workers, each
    // under its own rank (Inbound's sender).
    const Authenticator* authenticator = nullptr;
    // Optional: streams open at once (OpenStreamsBudget:
    // --max_open_streams, --max_open_streams_per_peer for one sender),
    // shared with the worker's other streaming services; one past either
    // is refused at once (RESOURCE_EXHAUSTED naming the sender and the
    // flag).
    std::shared_ptr<PeerBudget> open_streams;
    // Optional: asks whether a receiver's process is gone (not owned; null:
    // TCP connections on the timers).
    ListenerProbe* probe = nullptr;
  };

  // `directory` must be filled (the worker started) before the first Send.
  Exchange(int self_rank, const Directory* directory, ChannelPool* channels,
           Membership* membership, Mailbox* mailbox, Timers* timers,
           Options options);
  ~Exchange() override;

  // Sends `message` to global rank `dst` under `key`, carrying `trace` (if
  // valid) as its stream's traceparent. Deadlines are on the timers' clock.
  Future<Done> Send(int dst, const MessageKey& key, const Value& message,
                    absl::Time deadline, const TraceContext& trace) override;
  // Tells `dst` that `op` failed with `status` (best effort).
  void SendAbort(int dst, const std::string& op, const absl::Status& status,
                 absl::Time deadline) override;

  // Fails the sends in flight to `node`.
  void FailNode(uint64_t node, const absl::Status& reason) override {
    inflight_.FailNode(node, reason);
  }
  // Cancels everything and waits (bounded) for the streams to end.
  void Stop() override;
  // Drops the messages still arriving --mailbox_ttl_ms after they began.
  void ExpireStale() override ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  class SendStream;
  class ReceiveStream;
  struct Outgoing;

  void Attempt(std::shared_ptr<Outgoing> out, int attempt);
  // Attempt on a stream of the message's own.
  void AttemptOwn(std::shared_ptr<Outgoing> out, int attempt);
  // Attempt on the standing stream to out->dst.
  void AttemptStanding(const std::shared_ptr<Outgoing>& out, int attempt);
  // The standing stream to `dst` (opened now if there is none, or if the
  // last one ended).
  std::shared_ptr<StandingSender> StandingTo(int dst) ABSL_LOCKS_EXCLUDED(mu_);
  // A standing stream ended: forgotten, and the status its unanswered
  // messages fail with.
  absl::Status StandingEnded(int dst, const StandingSender* sender,
                             InflightCalls::Token token,
                             const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One message of a standing stream from `sender` (-1: unchecked), taken
  // whole into the mailbox; its answer.
  absl::Status TakeStanding(int sender, const grpc::ByteBuffer& frame,
                            bool* backpressure);
  // How a message ended: its answer, or its stream's end (then
  // `written_unanswered` if it was written out whole).
  void Settle(const std::shared_ptr<Outgoing>& out, int attempt,
              absl::Status status, bool backpressure, bool written_unanswered);
  // A message whose stream ended unanswered after it was written: sent if
  // its receiver's process is gone, else `failure`.
  void SettleWritten(const std::shared_ptr<Outgoing>& out,
                     absl::Status failure);
  // The streams receiving now, for ExpireStale.
  uint64_t AddInbound(std::shared_ptr<Inbound> inbound)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveInbound(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  const int self_;
  const Directory* const directory_;
  Membership* const membership_;
  Mailbox* const mailbox_;
  Timers* const timers_;
  const Options options_;
  GenericStubs stubs_;
  const std::unique_ptr<ListenerProbe> own_probe_;  // Unless options name one.
  ListenerProbe* const probe_;
  InflightCalls inflight_;
  std::atomic<bool> stopped_{false};

  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Inbound>> inbound_
      ABSL_GUARDED_BY(mu_);
  // The standing stream to each global rank, with the incarnation it
  // reaches (a replacement gets a new one).
  struct Standing {
    uint64_t generation = 0;
    std::shared_ptr<StandingSender> sender;
  };
  absl::flat_hash_map<int, Standing> standing_ ABSL_GUARDED_BY(mu_);
  uint64_t next_inbound_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_EXCHANGE_H_
