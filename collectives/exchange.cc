#include "collectives/exchange.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "proto/collectives.pb.h"
#include "rpc/base/status_util.h"
#include "rpc/grpc_status.h"
#include "rpc/value/value_proto.h"
#include "rpc/wire_writer.h"

namespace ferry {

namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(5);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(200);

grpc::Slice HeaderSlice(const proto::ChunkHeader& header) {
  std::string body = header.SerializeAsString();
  WireWriter w;
  w.Varint(body.size());
  w.Copy(body);
  grpc::ByteBuffer bb = w.Finish();
  std::vector<grpc::Slice> slices;
  (void)bb.Dump(&slices);
  return slices[0];
}

// The message's frames: the header (with the total) on the first, the
// payload cut into chunks of at most `chunk` bytes (sub-slices, no copy).
std::vector<grpc::ByteBuffer> MakeFrames(proto::ChunkHeader header,
                                         const grpc::ByteBuffer& payload,
                                         int64_t chunk) {
  std::vector<grpc::Slice> slices;
  if (payload.Valid()) (void)payload.Dump(&slices);
  header.set_total(
      static_cast<int64_t>(payload.Valid() ? payload.Length() : 0));
  std::vector<grpc::ByteBuffer> frames;
  grpc::Slice first = HeaderSlice(header);
  grpc::Slice rest = HeaderSlice(proto::ChunkHeader());
  size_t si = 0, offset = 0;
  do {
    std::vector<grpc::Slice> frame = {frames.empty() ? first : rest};
    int64_t budget = chunk;
    while (budget > 0 && si < slices.size()) {
      size_t take = std::min<size_t>(slices[si].size() - offset, budget);
      frame.push_back(slices[si].sub(offset, offset + take));
      budget -= static_cast<int64_t>(take);
      offset += take;
      if (offset == slices[si].size()) {
        ++si;
        offset = 0;
      }
    }
    frames.emplace_back(frame.data(), frame.size());
  } while (si < slices.size());
  return frames;
}

}  // namespace

// ---- Sending ----

struct Exchange::Outgoing {
  int dst = 0;
  std::string dst_name;
  std::shared_ptr<const std::vector<grpc::ByteBuffer>> frames;
  absl::Time deadline;
  Promise<Done> done;
};

class Exchange::SendStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  SendStream(std::shared_ptr<const std::vector<grpc::ByteBuffer>> frames,
             std::shared_ptr<grpc::ClientContext> context,
             std::function<void(const grpc::Status&)> done)
      : frames_(std::move(frames)),
        context_(std::move(context)),
        done_(std::move(done)) {}

  void Start(grpc::GenericStub* stub) {
    stub->PrepareBidiStreamingCall(context_.get(), kMethod, grpc::StubOptions(),
                                   this);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // Otherwise OnDone reports why.
  }

  void OnDone(const grpc::Status& status) override {
    done_(status);
    delete this;
  }

 private:
  // One write in flight; the last frame also half-closes the stream.
  void WriteNext() {
    if (next_ >= frames_->size()) return;
    const grpc::ByteBuffer* frame = &(*frames_)[next_++];
    if (next_ == frames_->size()) {
      StartWriteLast(frame, grpc::WriteOptions());
    } else {
      StartWrite(frame);
    }
  }

  const std::shared_ptr<const std::vector<grpc::ByteBuffer>> frames_;
  const std::shared_ptr<grpc::ClientContext> context_;
  const std::function<void(const grpc::Status&)> done_;
  size_t next_ = 0;
};

Exchange::Exchange(int self_rank, const Directory* directory,
                   ChannelPool* channels, Membership* membership,
                   Mailbox* mailbox, Timers* timers, Options options)
    : self_(self_rank),
      directory_(directory),
      membership_(membership),
      mailbox_(mailbox),
      timers_(timers),
      options_(options),
      stubs_(channels) {}

Exchange::~Exchange() { Stop(); }

void Exchange::Stop() {
  stopped_ = true;
  inflight_.CancelAll(absl::CancelledError("stopping"));
  inflight_.WaitIdle(absl::Now() + absl::Seconds(5));
}

Future<Done> Exchange::Send(int dst, const MessageKey& key,
                            const Value& message, absl::Time deadline) {
  const WorkerInfo& peer = directory_->at(dst);
  if (stopped_)
    return Future<Done>::Ready(absl::UnavailableError("collectives stopped"));
  if (auto down = membership_->DownReason(WorkerNode(dst))) {
    return Future<Done>::Ready(*down);
  }
  absl::StatusOr<grpc::ByteBuffer> payload =
      EncodeValue(message, nullptr, "message");
  if (!payload.ok()) return Future<Done>::Ready(payload.status());
  proto::ChunkHeader header;
  header.set_op(key.op);
  header.set_step(key.step);
  header.set_src(self_);
  auto out = std::make_shared<Outgoing>();
  out->dst = dst;
  out->dst_name = peer.name;
  out->frames = std::make_shared<const std::vector<grpc::ByteBuffer>>(
      MakeFrames(header, *payload, options_.chunk_bytes));
  out->deadline = deadline;
  Future<Done> done = out->done.future();
  Attempt(std::move(out), 0);
  return done;
}

void Exchange::SendAbort(int dst, const std::string& op,
                         const absl::Status& status, absl::Time deadline) {
  if (membership_->DownReason(WorkerNode(dst)).has_value()) return;
  proto::ChunkHeader header;
  header.set_op(op);
  header.set_src(self_);
  header.set_kind(proto::ChunkHeader::ABORT);
  header.set_code(static_cast<int>(status.code()));
  header.set_error(std::string(status.message()));
  auto out = std::make_shared<Outgoing>();
  out->dst = dst;
  out->dst_name = directory_->at(dst).name;
  out->frames = std::make_shared<const std::vector<grpc::ByteBuffer>>(
      MakeFrames(header, grpc::ByteBuffer(), options_.chunk_bytes));
  out->deadline = deadline;
  Attempt(std::move(out), 0);  // Nobody waits for an abort's delivery.
}

void Exchange::Attempt(std::shared_ptr<Outgoing> out, int attempt) {
  if (stopped_) {  // A retry after Stop.
    out->done.Set(absl::UnavailableError("collectives stopped"));
    return;
  }
  auto context = std::make_shared<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(out->deadline));
  InflightCalls::Token token = inflight_.Add(WorkerNode(out->dst), context);
  auto* stream = new SendStream(
      out->frames, context, [this, out, attempt, token](const grpc::Status& s) {
        absl::Status failure = inflight_.Remove(token);
        Settle(out, attempt, failure.ok() ? FromGrpcStatus(s) : failure);
        inflight_.Finished();
      });
  stream->Start(stubs_.For(directory_->at(out->dst)));
}

void Exchange::Settle(const std::shared_ptr<Outgoing>& out, int attempt,
                      absl::Status status) {
  absl::Duration backoff =
      std::min(kFirstBackoff * (1 << std::min(attempt, 10)), kMaxBackoff);
  if (status.code() == absl::StatusCode::kResourceExhausted &&
      absl::Now() + backoff < out->deadline) {
    // The receiver's buffer is full: wait and send again (backpressure).
    timers_->RunAfter(backoff,
                      [this, out, attempt] { Attempt(out, attempt + 1); });
    return;
  }
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    // Still no room at the deadline: the receiver never took the message.
    status = absl::DeadlineExceededError(absl::StrCat(
        out->dst_name, " did not take the message before the deadline (",
        status.message(), ")"));
  }
  if (auto down = membership_->DownReason(WorkerNode(out->dst))) status = *down;
  out->done.Set(status.ok() ? absl::StatusOr<Done>(Done())
                            : absl::StatusOr<Done>(status));
}

// ---- Receiving ----

class Exchange::ReceiveStream final : public grpc::ServerGenericBidiReactor {
 public:
  explicit ReceiveStream(Exchange* exchange) : exchange_(exchange) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The sender is done (or gone).
      Complete();
      return;
    }
    absl::Status s = Take();
    frame_.Clear();
    if (!s.ok()) {
      Release();
      Finish(ToGrpcStatus(s));
      return;
    }
    StartRead(&frame_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Take();
  void Complete();
  void Release() {
    if (admitted_) exchange_->mailbox_->Release(total_);
    admitted_ = false;
  }

  Exchange* const exchange_;
  grpc::ByteBuffer frame_;
  bool started_ = false;
  bool admitted_ = false;
  proto::ChunkHeader header_;
  MessageKey key_;
  int64_t total_ = 0;
  int64_t received_ = 0;
  std::vector<grpc::Slice> payload_;
};

absl::Status Exchange::ReceiveStream::Take() {
  std::vector<grpc::Slice> slices;
  if (!frame_.Dump(&slices).ok() || slices.empty()) {
    return absl::DataLossError("empty collective frame");
  }
  // The header is small: gather its bytes (varint length, then the header).
  std::string head;
  size_t si = 0, offset = 0;
  auto take = [&](size_t n) {
    while (head.size() < n && si < slices.size()) {
      size_t k = std::min(n - head.size(), slices[si].size() - offset);
      head.append(reinterpret_cast<const char*>(slices[si].begin()) + offset,
                  k);
      offset += k;
      if (offset == slices[si].size()) {
        ++si;
        offset = 0;
      }
    }
    return head.size() == n;
  };
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (shift > 28 || !take(head.size() + 1))
      return absl::DataLossError("bad frame header");
    uint8_t b = static_cast<uint8_t>(head.back());
    length |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  size_t prefix = head.size();
  if (!take(prefix + length))
    return absl::DataLossError("truncated frame header");
  proto::ChunkHeader header;
  if (!header.ParseFromArray(head.data() + prefix, static_cast<int>(length))) {
    return absl::DataLossError("unparsable frame header");
  }
  if (!started_) {
    started_ = true;
    header_ = header;
    key_ = MessageKey{header.op(), header.step(), header.src()};
    total_ = header.total();
    if (header.kind() == proto::ChunkHeader::ABORT) {
      // A peer's code outside gRPC's range (or OK) counts as UNKNOWN.
      const int code = header.code();
      exchange_->mailbox_
          ->Abort(header.op(),
                  absl::Status(code > 0 && code <= 16
                                   ? static_cast<absl::StatusCode>(code)
                                   : absl::StatusCode::kUnknown,
                               header.error()))
          .IgnoreError();
      return absl::OkStatus();
    }
    FERRY_RETURN_IF_ERROR(exchange_->mailbox_->Admit(key_, total_));
    admitted_ = true;
  }
  for (; si < slices.size(); ++si, offset = 0) {
    grpc::Slice part =
        offset == 0 ? slices[si] : slices[si].sub(offset, slices[si].size());
    received_ += static_cast<int64_t>(part.size());
    payload_.push_back(std::move(part));
  }
  if (received_ > total_)
    return absl::DataLossError("message longer than announced");
  return absl::OkStatus();
}

void Exchange::ReceiveStream::Complete() {
  if (!started_ || header_.kind() == proto::ChunkHeader::ABORT) {
    Finish(grpc::Status::OK);
    return;
  }
  absl::Status status;
  if (received_ != total_) {
    status = absl::DataLossError(absl::StrCat("message cut short: ", received_,
                                              " of ", total_, " bytes"));
  } else {
    grpc::ByteBuffer whole(payload_.data(), payload_.size());
    payload_.clear();
    proto::Value message;
    status = FromGrpcStatus(
        grpc::SerializationTraits<proto::Value>::Deserialize(&whole, &message));
    absl::StatusOr<Value> value = status.ok()
                                      ? ValueFromProto(&message, "message")
                                      : absl::StatusOr<Value>(status);
    if (value.ok()) {
      admitted_ = false;  // Deliver settles the admitted bytes.
      status = exchange_->mailbox_->Deliver(key_, *std::move(value), total_);
    } else {
      status = value.status();
    }
  }
  Release();
  Finish(ToGrpcStatus(status));
}

namespace {

// Answers a stream it will not serve, at once.
class Refusal final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(grpc::Status status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerGenericBidiReactor* Exchange::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kMethod) {
    return new Refusal(
        grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                     absl::StrCat("unknown method ", context->method())));
  }
  return new ReceiveStream(this);
}

}  // namespace ferry
