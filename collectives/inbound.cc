#include "collectives/inbound.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/op_key.h"
#include "rpc/base/status_util.h"
#include "rpc/wire_reader.h"

namespace ferry {

namespace {

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("collective frame: ", why));
}

// A peer's code outside gRPC's range (or OK) counts as UNKNOWN.
absl::StatusCode PeerCode(int code) {
  return code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code)
                                : absl::StatusCode::kUnknown;
}

// Later frames carry a default header: anything else is a second message
// squeezed into the stream.
bool IsContinuation(const proto::ChunkHeader& h) {
  return h.op().empty() && h.step() == 0 && h.src() == 0 && h.total() == 0 &&
         h.kind() == proto::ChunkHeader::DATA && h.code() == 0 &&
         h.error().empty();
}

}  // namespace

Inbound::Inbound(Mailbox* mailbox, InboundOptions options)
    : mailbox_(mailbox), options_(options) {}

Inbound::~Inbound() {
  // A message admitted but never whole (the stream broke, or was refused
  // by gRPC): its bytes are no longer coming.
  absl::MutexLock lock(&mu_);
  if (state_ == State::kReceiving) mailbox_->Release(key_, total_);
}

absl::StatusOr<Inbound::Next> Inbound::Take(const grpc::ByteBuffer& bytes) {
  absl::StatusOr<Frame> frame = ParseFrame(bytes);
  State state;
  {
    absl::MutexLock lock(&mu_);
    state = state_;
    if (state == State::kExpired) return ExpiredError();
  }
  if (state == State::kDone) return Bad("a frame after the message ended");
  if (!frame.ok()) return Refuse(frame.status());
  if (state == State::kNew) return Start(*std::move(frame));
  return Append(*std::move(frame), /*first=*/false);
}

absl::StatusOr<Inbound::Next> Inbound::Start(Frame frame) {
  const proto::ChunkHeader& h = frame.header;
  absl::Status sender = CheckSender(h.op(), h.step(), h.src(),
                                    options_.self_rank, options_.world_size);
  if (!sender.ok()) return Refuse(sender);
  if (options_.sender >= 0 && h.src() != options_.sender) {
    return Refuse(absl::PermissionDeniedError(absl::StrCat(
        "op ", h.op(), ": the frame claims src rank ", h.src(),
        " but the stream's credential is worker", options_.sender)));
  }
  if (h.kind() == proto::ChunkHeader::ABORT) {
    if (frame.payload_bytes != 0 || h.total() != 0)
      return Refuse(Bad("an abort carries no payload"));
    return ApplyAbort(h);
  }
  if (h.kind() != proto::ChunkHeader::DATA)
    return Refuse(Bad(absl::StrCat("unknown kind ", h.kind())));
  const MessageKey key{h.op(), h.step(), h.src()};
  // Admit first: no byte is held before it is counted.
  absl::Status admitted = mailbox_->Admit(key, h.total());
  if (!admitted.ok()) return Refuse(admitted);
  {
    absl::MutexLock lock(&mu_);
    state_ = State::kReceiving;
    key_ = key;
    total_ = h.total();
    started_ = options_.clock->Now();
  }
  return Append(std::move(frame), /*first=*/true);
}

absl::StatusOr<Inbound::Next> Inbound::ApplyAbort(const proto::ChunkHeader& h) {
  if (static_cast<int64_t>(h.error().size()) > kMaxAbortErrorBytes) {
    return Refuse(
        Bad(absl::StrCat("an abort's error of ", h.error().size(),
                         " bytes (at most ", kMaxAbortErrorBytes, ")")));
  }
  mailbox_->Abort(h.op(), absl::Status(PeerCode(h.code()), h.error()))
      .IgnoreError();
  absl::MutexLock lock(&mu_);
  state_ = State::kDone;
  return Next::kDone;
}

absl::StatusOr<Inbound::Next> Inbound::Append(Frame frame, bool first) {
  std::vector<grpc::Slice> whole;
  absl::Status bad;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kExpired) return ExpiredError();
    if (!first && !IsContinuation(frame.header)) {
      bad = Bad("a later frame has a header of its own");
    } else if (!first && frame.payload_bytes == 0) {
      bad = Bad("a later frame without payload");
    } else if (frame.payload_bytes > total_ - received_) {
      bad = Bad(absl::StrCat("the message is longer than its announced ",
                             total_, " bytes"));
    } else {
      received_ += frame.payload_bytes;
      for (grpc::Slice& s : frame.payload) payload_.push_back(std::move(s));
      if (received_ < total_) return Next::kMore;
      state_ = State::kDone;  // From here Deliver settles the admission.
      whole = std::move(payload_);
      payload_.clear();
    }
  }
  if (!bad.ok()) return Refuse(bad);
  absl::Status delivered = Deliver(std::move(whole));
  if (!delivered.ok()) return delivered;
  return Next::kDone;
}

absl::Status Inbound::Deliver(std::vector<grpc::Slice> payload) {
  MessageKey key;
  int64_t total;
  {
    absl::MutexLock lock(&mu_);
    key = key_;
    total = total_;
  }
  // Decoded straight from the received slices: a tensor the receiver has a
  // place for is copied there, once (the algorithm then has nothing left
  // to copy); others get one buffer each, as a protobuf parse would.
  std::optional<TensorLanding> landing = mailbox_->TakeLanding(key);
  absl::StatusOr<Value> value =
      ReadValue(payload, DefaultLimits(), "message",
                landing.has_value() ? &*landing : nullptr);
  payload.clear();
  if (!value.ok()) {
    mailbox_->Release(key, total);
    return Annotate(value.status(), "collective frame");
  }
  return mailbox_->Deliver(key, *std::move(value), total);
}

absl::Status Inbound::Refuse(absl::Status why) {
  std::vector<grpc::Slice> dropped;  // Freed outside the lock.
  MessageKey key;
  int64_t total = 0;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kExpired) return ExpiredError();
    release = state_ == State::kReceiving;
    key = key_;
    total = total_;
    dropped = std::move(payload_);
    payload_.clear();
    state_ = State::kDone;
  }
  if (release) mailbox_->Release(key, total);
  return why;
}

absl::Status Inbound::End() {
  State state;
  int64_t received, total;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kExpired) return ExpiredError();
    state = state_;
    received = received_;
    total = total_;
  }
  if (state != State::kReceiving) return absl::OkStatus();
  return Refuse(Bad(absl::StrCat("the message was cut short: ", received,
                                 " of ", total, " bytes")));
}

bool Inbound::ExpireIfStale() {
  std::vector<grpc::Slice> dropped;  // Freed outside the lock.
  MessageKey key;
  int64_t total = 0;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kReceiving ||
        options_.clock->Now() - started_ < absl::Milliseconds(options_.ttl_ms))
      return false;
    state_ = State::kExpired;
    key = key_;
    total = total_;
    dropped = std::move(payload_);
    payload_.clear();
  }
  mailbox_->Release(key, total);
  return true;
}

absl::Status Inbound::ExpiredError() const {
  return absl::DeadlineExceededError(
      absl::StrCat("op ", key_.op, ": the message from rank ", key_.src,
                   " did not arrive whole within ", options_.ttl_ms, " ms (",
                   received_, " of ", total_, " bytes), ",
                   LimitNote(absl::StrCat(options_.ttl_ms, " ms"),
                             "mailbox_ttl_ms", options_.ttl_ms)));
}

}  // namespace ferry
