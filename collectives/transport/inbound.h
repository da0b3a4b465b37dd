// One collective message arriving on an Exchange stream, frame by frame
// (frames.h), into the Mailbox. The receiving end of the transport, apart
// from gRPC, so that hostile frame sequences can be tested and fuzzed.
//
// Protocol, as enforced (any breach: INVALID_ARGUMENT, or PERMISSION_DENIED
// for a sender the op's group does not allow; the stream is refused at
// once and what it admitted given back):
//  - The first frame's header names the message: op, step, src — checked
//    by CheckSender (op_key.h) — and kind.
//  - ABORT: no payload, total 0, error of at most kMaxAbortErrorBytes, and
//    nothing after it: the op is aborted here with (code, error).
//  - DATA: `total` payload bytes, admitted by the Mailbox as the first frame
//    arrives (so every byte received is counted before it is held); each
//    later frame has an empty header and at least one payload byte, and no
//    frame goes past `total`. The message is complete — and delivered — the
//    moment `total` bytes are in; a frame after that is refused.
//  - The whole message must be in within --mailbox_ttl_ms of its first
//    frame (ExpireIfStale): then what arrived is dropped, the admission
//    given back, and later frames refused with DEADLINE_EXCEEDED naming the
//    flag. A stream that merely stays open costs only gRPC's own state.
//
// Each frame's payload is copied where it belongs as it arrives (while the
// next is on its way), so a message is decoded without another copy once
// it is whole. The first frame shows where the tensors' bytes begin, as
// far as it reaches (FindTensorData): the first tensor's bytes go to the
// landing its receiver offered (Mailbox::Receive) if they fit it; the rest
// of the message goes into one buffer, placed so that the largest tensor
// placed is aligned there, to be referenced rather than copied. A landing
// offered after the first frame came gets its tensor copied once the
// message is whole.
//
// Take and End are called by one thread at a time (the stream's
// reactions); ExpireIfStale from any thread.
#ifndef FERRY_COLLECTIVES_TRANSPORT_INBOUND_H_
#define FERRY_COLLECTIVES_TRANSPORT_INBOUND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/transport/frames.h"
#include "collectives/transport/mailbox.h"
#include "grpcpp/support/byte_buffer.h"
#include "rpc/base/clock.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

struct InboundOptions {
  int self_rank = 0;
  int world_size = 1;
  // How long a message may take to arrive whole (--mailbox_ttl_ms).
  int64_t ttl_ms = 60000;
  Clock* clock = nullptr;
  // The rank the stream's credential proves it comes from: frames claiming
  // another src are refused (PERMISSION_DENIED). -1: not checked (a job
  // without identities).
  int sender = -1;
};

class Inbound {
 public:
  enum class Next {
    kMore,  // Read the next frame.
    kDone,  // The message was delivered (or the abort applied): finish OK.
  };

  Inbound(Mailbox* mailbox, InboundOptions options);
  // Gives back what was admitted for a message never delivered.
  ~Inbound();

  Inbound(const Inbound&) = delete;
  Inbound& operator=(const Inbound&) = delete;

  // One frame. An error finishes the stream: the sender's message was
  // refused (IsBackpressure: refused for now), or the op's abort status.
  absl::StatusOr<Next> Take(const grpc::ByteBuffer& frame)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The sender ended the stream: OK if nothing or a whole message came,
  // INVALID_ARGUMENT if it was cut short.
  absl::Status End() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops a message still incomplete --mailbox_ttl_ms after its first
  // frame (see above). True if it did.
  bool ExpireIfStale() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State {
    kNew,        // No frame yet (only Take and End touch this state).
    kReceiving,  // Admitted; payload arriving.
    kDone,       // Delivered, aborted, or refused.
    kExpired,
  };

  // Where the payload's `total` bytes go: [land_begin, land_end) into the
  // landing (exactly its size), the others into `flat` (flat_size bytes
  // from `shift` on), in order. Plan checks each region lies inside the
  // message, and Place each write inside its region.
  struct Layout {
    uint64_t total = 0;
    std::shared_ptr<char> flat;
    size_t shift = 0;
    uint64_t flat_size = 0;
    std::optional<TensorLanding> landing;
    bool landed = false;  // The landing takes [land_begin, land_end).
    uint64_t land_begin = 0;
    uint64_t land_end = 0;
  };

  absl::StatusOr<Next> Start(Frame frame) ABSL_LOCKS_EXCLUDED(mu_);
  // The layout of the message `key` of `total` bytes beginning with
  // `first`, its buffer allocated (RESOURCE_EXHAUSTED if it cannot be).
  // INVALID_ARGUMENT, naming op, sender and field, if `first` places a
  // tensor no message could (FindTensorData).
  absl::StatusOr<Layout> Plan(const MessageKey& key, int64_t total,
                              const std::vector<grpc::Slice>& first);
  // Copies payload bytes `bytes`, from `offset` on, where `at` puts them;
  // INVALID_ARGUMENT (nothing written past a region) if a byte would land
  // outside the message, the landing or the buffer.
  static absl::Status Place(const Layout& at, uint64_t offset,
                            const std::vector<grpc::Slice>& bytes);
  absl::StatusOr<Next> ApplyAbort(const proto::ChunkHeader& header);
  absl::StatusOr<Next> Append(Frame frame, bool first) ABSL_LOCKS_EXCLUDED(mu_);
  // Decodes the whole payload and hands it to the mailbox.
  absl::Status Deliver(Layout payload);
  // Ends a message that will not be delivered: gives back its admission.
  absl::Status Refuse(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ExpiredError() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mailbox* const mailbox_;
  const InboundOptions options_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kNew;
  MessageKey key_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  Layout layout_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_INBOUND_H_
