// Standing streams: one long-lived gRPC stream from this worker to each
// peer, opened on first use and reused by every op, for collective
// messages that fit one frame (proto/collectives.proto, StandingAck).
//
// A message on a stream of its own pays for the stream: a call set up and
// torn down at both ends (headers, credential check, deadline timer,
// trailers), most of a small message's cost. On a standing stream a
// message is one frame, answered by one small ack, and the stream's
// caller was authenticated once, when it opened.
//
// Semantics are those of a message's own stream: each message is answered
// exactly once, in order — delivered, refused (the receiver's code and
// error), or refused for now (backpressure: the sender retries later) —
// and a stream that ends fails every message it had not answered with
// the stream's status. Nothing waits: sends are queued, one write in
// flight, and acks complete them on gRPC's threads.
#ifndef FERRY_COLLECTIVES_TRANSPORT_STANDING_STREAM_H_
#define FERRY_COLLECTIVES_TRANSPORT_STANDING_STREAM_H_

#include <deque>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/server_callback.h"

namespace ferry {

inline constexpr char kStandingStreamMethod[] =
    "/ferry.proto.Collectives/Stream";

// The sending end: a client stream to one peer.
class StandingSender final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // How one message was answered: OK (delivered), the receiver's refusal,
  // or the stream's end; `written_unanswered`: the stream ended without
  // answering it after its frame was written out whole (its receiver may
  // have taken it).
  using Answered = absl::AnyInvocable<void(absl::Status, bool backpressure,
                                           bool written_unanswered) &&>;
  // Runs once when the stream ended (on gRPC's thread), before the
  // unanswered messages are told: it maps gRPC's status to the one each of
  // them fails with.
  using Ended = std::function<absl::Status(const StandingSender* sender,
                                           const grpc::Status& status)>;
  // Runs once after that, the stream's last use of whoever opened it.
  using Finished = std::function<void()>;

  // A stream under `context` (which must not be reused), ready for Send
  // (what is sent waits for Start). The stream keeps the sender alive
  // until it ends.
  static std::shared_ptr<StandingSender> Prepare(
      grpc::GenericStub* stub, std::shared_ptr<grpc::ClientContext> context,
      Ended ended, Finished finished);
  // Opens the stream. Its reactions may run on this thread, so call it
  // holding no lock they take.
  void Start() { StartCall(); }

  // Queues one frame (a whole message); `answered` runs once. False if the
  // stream has ended (nothing is queued: send it another way).
  bool Send(grpc::ByteBuffer frame, Answered answered) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the stream has ended (or is ending).
  bool ended() const ABSL_LOCKS_EXCLUDED(mu_);

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone(const grpc::Status& status) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Queued {
    grpc::ByteBuffer frame;
    Answered answered;
  };
  struct Unanswered {
    Answered answered;
    bool written = false;  // Its write completed.
  };

  StandingSender(std::shared_ptr<grpc::ClientContext> context, Ended ended,
                 Finished finished)
      : context_(std::move(context)),
        ended_(std::move(ended)),
        finished_(std::move(finished)) {}

  // Starts the next queued write unless one is in flight.
  void WriteNext() ABSL_LOCKS_EXCLUDED(mu_);
  // The read failed: the stream is ending. Releases the hold unless a
  // write is being started.
  void StreamEnded() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the caller must release the hold now (once, after the stream
  // ended and when no write is being started).
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<grpc::ClientContext> context_;
  const Ended ended_;
  const Finished finished_;
  grpc::ByteBuffer ack_;            // The ack being read (one read at a time).
  grpc::ByteBuffer writing_frame_;  // The frame being written.

  mutable absl::Mutex mu_;
  std::shared_ptr<StandingSender> self_ ABSL_GUARDED_BY(mu_);  // Until done.
  // The stream ended or is ending: nothing more is written.
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // Between WriteNext's unlock and StartWrite's return.
  bool starting_write_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Queued> queued_ ABSL_GUARDED_BY(mu_);  // Not written yet.
  // Being written or written, in order.
  std::deque<Unanswered> unanswered_ ABSL_GUARDED_BY(mu_);
};

// The receiving end: takes each frame (one whole message) and answers it.
class StandingReceiver final : public grpc::ServerGenericBidiReactor {
 public:
  // The answer to one message: OK (delivered) or why it was refused
  // (`backpressure`: refused for now). Called once per frame, in order.
  using Take = std::function<absl::Status(const grpc::ByteBuffer& frame,
                                          bool* backpressure)>;

  // Serves a stream whose caller was checked already; `take` must stay
  // valid until the stream is done.
  explicit StandingReceiver(Take take);

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override { delete this; }

 private:
  // Writes the next ack, or finishes the stream once the reads ended and
  // every ack is out.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  const Take take_;
  grpc::ByteBuffer frame_;        // The frame being read.
  grpc::ByteBuffer writing_ack_;  // The ack being written.

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> acks_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_STANDING_STREAM_H_
