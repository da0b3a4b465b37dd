#include "collectives/transport/inbound.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/transport/op_key.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/wire/wire_cursor.h"
#include "rpc/wire/wire_reader.h"

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

absl::Status LongerThan(int64_t total) {
  return Bad(absl::StrCat("the message is longer than its announced ", total,
                          " bytes"));
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
  // Before anything is admitted or placed (Append checks every frame).
  if (frame.payload_bytes > h.total()) return Refuse(LongerThan(h.total()));
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
  absl::StatusOr<Layout> layout = Plan(key, h.total(), frame.payload);
  if (!layout.ok()) return Refuse(layout.status());
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kExpired) return ExpiredError();
    layout_ = *std::move(layout);
  }
  return Append(std::move(frame), /*first=*/true);
}

namespace {

// Where message byte `offset` (not in the landing) goes in the buffer: the
// bytes after the landed tensor move up by its length.
uint64_t FlatOffset(uint64_t offset, bool landed, uint64_t land_begin,
                    uint64_t land_end) {
  if (!landed || offset < land_begin) return offset;
  return offset >= land_end ? offset - (land_end - land_begin) : land_begin;
}

}  // namespace

absl::StatusOr<Inbound::Layout> Inbound::Plan(
    const MessageKey& key, int64_t total,
    const std::vector<grpc::Slice>& first) {
  // Malloc's alignment: a tensor placed on it may be referenced.
  constexpr size_t kAlign = 16;
  const std::string from =
      absl::StrCat("op ", key.op, ": the message from rank ", key.src);
  Layout at;
  at.total = static_cast<uint64_t>(total);  // Admitted: 0 <= total.
  absl::StatusOr<std::vector<TensorPlace>> found =
      FindTensorData(first, at.total);
  if (!found.ok()) return Annotate(found.status(), from);
  const std::vector<TensorPlace>& places = *found;
  // Inside the message by FindTensorData's construction; checked again
  // here, where the bytes are written.
  for (const TensorPlace& p : places) {
    if (!RangeWithin(p.offset, p.length, at.total)) {
      return Bad(absl::StrCat(from, ": a tensor of ", p.length,
                              " bytes at byte ", p.offset, " is past its ",
                              total, " bytes"));
    }
  }
  at.landing = mailbox_->TakeLanding(key);
  size_t rest = 0;  // The tensors that go to the buffer: places[rest..].
  if (!places.empty() && at.landing.has_value() && places[0].length > 0 &&
      places[0].length == at.landing->nbytes) {
    at.landed = true;
    at.land_begin = places[0].offset;
    at.land_end = places[0].offset + places[0].length;
    rest = 1;
  }
  at.flat_size = at.total - (at.land_end - at.land_begin);
  // The largest of the others is aligned in the buffer, to be referenced.
  const TensorPlace* largest = nullptr;
  for (size_t i = rest; i < places.size(); ++i) {
    if (largest == nullptr || places[i].length > largest->length)
      largest = &places[i];
  }
  if (largest != nullptr) {
    const uint64_t in_flat =
        FlatOffset(largest->offset, at.landed, at.land_begin, at.land_end);
    at.shift = (kAlign - in_flat % kAlign) % kAlign;
  }
  // Counted against --max_mailbox_mb by Admit already.
  char* flat = new (std::nothrow) char[at.shift + at.flat_size + 1];
  if (flat == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("op ", key.op, ": no memory for a message of ", total,
                     " bytes from rank ", key.src));
  }
  at.flat.reset(flat, std::default_delete<char[]>());
  return at;
}

absl::Status Inbound::Place(const Layout& at, uint64_t offset,
                            const std::vector<grpc::Slice>& bytes) {
  for (const grpc::Slice& s : bytes) {
    const char* from = reinterpret_cast<const char*>(s.begin());
    uint64_t left = s.size();
    if (!RangeWithin(offset, left, at.total)) {
      return Bad(absl::StrCat("payload at byte ", offset,
                              " past the message's ", at.total, " bytes"));
    }
    while (left > 0) {
      // The run of bytes from `offset` within one region, checked to lie
      // inside it.
      uint64_t run = left;
      char* to;
      if (at.landed && offset >= at.land_begin && offset < at.land_end) {
        run = std::min(run, at.land_end - offset);
        const uint64_t in_landing = offset - at.land_begin;
        if (!RangeWithin(in_landing, run, at.landing->nbytes)) {
          return Bad("payload past the tensor's landing");
        }
        if (at.landing->writer != nullptr) {
          if (!at.landing->writer->Write(in_landing, from, run)) {
            return Bad("payload the tensor's landing would not take");
          }
          from += run;
          offset += run;
          left -= run;
          continue;
        }
        to = at.landing->data + in_landing;
      } else {
        if (at.landed && offset < at.land_begin) {
          run = std::min(run, at.land_begin - offset);
        }
        const uint64_t in_flat =
            FlatOffset(offset, at.landed, at.land_begin, at.land_end);
        if (!RangeWithin(in_flat, run, at.flat_size)) {
          return Bad("payload past the message's buffer");
        }
        to = at.flat.get() + at.shift + in_flat;
      }
      std::memcpy(to, from, run);
      from += run;
      offset += run;
      left -= run;
    }
  }
  return absl::OkStatus();
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
  Layout at;
  MessageKey key;
  uint64_t offset = 0;
  bool whole = false;
  absl::Status bad;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kExpired) return ExpiredError();
    if (!first && !IsContinuation(frame.header)) {
      bad = Bad("a later frame has a header of its own");
    } else if (!first && frame.payload_bytes == 0) {
      bad = Bad("a later frame without payload");
    } else if (frame.payload_bytes > total_ - received_) {
      bad = LongerThan(total_);
    } else {
      key = key_;
      offset = static_cast<uint64_t>(received_);
      received_ += frame.payload_bytes;
      whole = received_ == total_;
      // From here Deliver settles the admission.
      if (whole) state_ = State::kDone;
      at = layout_;
    }
  }
  if (!bad.ok()) return Refuse(bad);
  // Outside the lock: `at` keeps the buffers alive whatever happens to the
  // message meanwhile (it may expire), and only this stream writes them.
  if (absl::Status placed = Place(at, offset, frame.payload); !placed.ok()) {
    return Refuse(Annotate(
        placed,
        absl::StrCat("op ", key.op, ": the message from rank ", key.src)));
  }
  if (!whole) return Next::kMore;
  {
    absl::MutexLock lock(&mu_);
    layout_ = Layout();
  }
  absl::Status delivered = Deliver(std::move(at));
  if (!delivered.ok()) return delivered;
  return Next::kDone;
}

namespace {

// `n` bytes at `data` as a slice that keeps `owner` alive.
grpc::Slice SliceOf(std::shared_ptr<void> owner, char* data, size_t n) {
  auto* keep = new std::shared_ptr<void>(std::move(owner));
  return grpc::Slice(
      data, n, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); },
      keep);
}

}  // namespace

absl::Status Inbound::Deliver(Layout payload) {
  MessageKey key;
  int64_t total;
  {
    absl::MutexLock lock(&mu_);
    key = key_;
    total = total_;
  }
  // The message, whole, as the slices of where it was placed: decoded
  // without another copy (the tensor in the landing, or referenced in the
  // buffer).
  std::vector<grpc::Slice> slices;
  char* flat = payload.flat.get() + payload.shift;
  const uint64_t land = payload.land_end - payload.land_begin;
  if (!payload.landed) {
    if (total > 0) slices.push_back(SliceOf(payload.flat, flat, total));
  } else {
    if (payload.land_begin > 0)
      slices.push_back(SliceOf(payload.flat, flat, payload.land_begin));
    slices.push_back(
        SliceOf(payload.landing->owner, payload.landing->data, land));
    if (static_cast<uint64_t>(total) > payload.land_end) {
      slices.push_back(SliceOf(payload.flat, flat + payload.land_begin,
                               total - payload.land_end));
    }
  }
  payload.flat.reset();
  // A receiver that offered its landing only after the first frame came
  // still has the tensor copied there, once, now.
  if (!payload.landing.has_value()) {
    payload.landing = mailbox_->TakeLanding(key);
  }
  absl::StatusOr<Value> value =
      ReadValue(slices, DefaultLimits(), "message",
                payload.landing.has_value() ? &*payload.landing : nullptr,
                payload.landed);
  slices.clear();
  if (!value.ok()) {
    mailbox_->Release(key, total);
    return Annotate(value.status(), "collective frame");
  }
  return mailbox_->Deliver(key, *std::move(value), total);
}

absl::Status Inbound::Refuse(absl::Status why) {
  Layout dropped;  // Freed outside the lock.
  MessageKey key;
  int64_t total = 0;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kExpired) return ExpiredError();
    release = state_ == State::kReceiving;
    key = key_;
    total = total_;
    dropped = std::exchange(layout_, Layout());
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
  Layout dropped;  // Freed outside the lock.
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
    dropped = std::exchange(layout_, Layout());
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
