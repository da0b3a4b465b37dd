#include "collectives/transport/exchange.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/transport/frames.h"
#include "proto/collectives.pb.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/tracing.h"
#include "rpc/value/value_proto.h"
#include "rpc/wire/grpc_status.h"
#include "rpc/wire/wire_writer.h"

namespace ferry {

namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(5);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(200);

// Receivers mark a refusal "retry later" in the trailers (the status code
// alone cannot tell it from a refusal for good).
constexpr char kBackpressureKey[] = "ferry-backpressure";

// At most `max` bytes of `text`, not cutting a UTF-8 sequence (a header
// with broken UTF-8 would not parse).
std::string Utf8Prefix(absl::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t n = max;
  while (n > 0 && (static_cast<uint8_t>(text[n]) & 0xC0) == 0x80) --n;
  return std::string(text.substr(0, n));
}

bool MarkedBackpressure(const grpc::ClientContext& context) {
  return context.GetServerTrailingMetadata().count(kBackpressureKey) > 0;
}

}  // namespace

// ---- Sending ----

struct Exchange::Outgoing {
  int dst = 0;
  std::string dst_name;
  int64_t bytes = 0;  // Of the payload.
  std::shared_ptr<const std::vector<grpc::ByteBuffer>> frames;
  absl::Time deadline;
  TraceContext trace;
  Promise<Done> done;
};

class Exchange::SendStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `done(status, written)`: how the stream ended, and whether every frame
  // had been written out by then.
  SendStream(std::shared_ptr<const std::vector<grpc::ByteBuffer>> frames,
             std::shared_ptr<grpc::ClientContext> context,
             std::function<void(const grpc::Status&, bool written)> done)
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
    if (!ok) return;  // OnDone reports why.
    if (next_ >= frames_->size()) written_ = true;
    WriteNext();
  }

  void OnDone(const grpc::Status& status) override {
    done_(status, written_);
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
  const std::function<void(const grpc::Status&, bool written)> done_;
  size_t next_ = 0;
  bool written_ = false;  // The last frame's write completed.
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
      stubs_(channels),
      own_probe_(options.probe == nullptr
                     ? std::make_unique<TcpListenerProbe>(timers)
                     : nullptr),
      probe_(options.probe != nullptr ? options.probe : own_probe_.get()) {}

Exchange::~Exchange() { Stop(); }

void Exchange::Stop() {
  stopped_ = true;
  inflight_.CancelAll(absl::CancelledError("stopping"));
  // A bound on gRPC's callbacks of the cancelled sends (real events, which
  // come promptly), not a protocol time.
  inflight_.WaitIdle(absl::Seconds(5));
}

Future<Done> Exchange::Send(int dst, const MessageKey& key,
                            const Value& message, absl::Time deadline,
                            const TraceContext& trace) {
  const WorkerInfo& peer = directory_->at(dst);
  if (stopped_)
    return Future<Done>::Ready(absl::UnavailableError("collectives stopped"));
  if (auto down = membership_->DownReason(WorkerNode(dst))) {
    return Future<Done>::Ready(*down);
  }
  absl::StatusOr<grpc::ByteBuffer> payload =
      EncodeValue(message, nullptr, "message");
  if (!payload.ok()) return Future<Done>::Ready(payload.status());
  // The receiver would refuse it (and the backoff would retry in vain).
  const int64_t bytes = static_cast<int64_t>(payload->Length());
  if (bytes > mailbox_->max_message_bytes()) {
    const int64_t max =
        mailbox_->max_message_bytes() - Mailbox::kFramingAllowance;
    return Future<Done>::Ready(
        OverLimit(absl::StrCat("a collective message of ", HumanBytes(bytes),
                               " to ", peer.name),
                  HumanBytes(max), "max_mailbox_mb", max / Limits::kMiB));
  }
  proto::ChunkHeader header;
  header.set_op(key.op);
  header.set_step(key.step);
  header.set_src(self_);
  auto out = std::make_shared<Outgoing>();
  out->dst = dst;
  out->dst_name = peer.name;
  out->bytes = bytes;
  out->frames = std::make_shared<const std::vector<grpc::ByteBuffer>>(
      MakeFrames(header, *payload, options_.chunk_bytes));
  out->deadline = deadline;
  out->trace = trace;
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
  // Receivers refuse longer errors (they keep aborts for a while).
  header.set_error(Utf8Prefix(status.message(), kMaxAbortErrorBytes));
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
  if (out->frames->size() == 1 && out->bytes <= options_.standing_bytes) {
    return AttemptStanding(out, attempt);
  }
  AttemptOwn(std::move(out), attempt);
}

void Exchange::AttemptStanding(const std::shared_ptr<Outgoing>& out,
                               int attempt) {
  // A stream that ended between the lookup and the send: the next one.
  for (int tries = 0; tries < 2; ++tries) {
    std::shared_ptr<StandingSender> stream = StandingTo(out->dst);
    if (stream == nullptr) break;
    if (stream->Send((*out->frames)[0], [this, out, attempt](
                                            absl::Status s, bool backpressure,
                                            bool written_unanswered) {
          Settle(out, attempt, std::move(s), backpressure, written_unanswered);
        })) {
      return;
    }
  }
  AttemptOwn(out, attempt);
}

std::shared_ptr<StandingSender> Exchange::StandingTo(int dst) {
  const WorkerInfo& peer = directory_->at(dst);
  std::shared_ptr<StandingSender> opened;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return nullptr;
    Standing& s = standing_[dst];
    if (s.sender != nullptr && s.generation == peer.generation &&
        !s.sender->ended()) {
      return s.sender;
    }
    // Made under the lock, so one stream per peer; started outside it
    // (its reactions may run on this thread, and take the lock).
    auto context = std::make_shared<grpc::ClientContext>();
    const InflightCalls::Token token = inflight_.Add(WorkerNode(dst), context);
    s.generation = peer.generation;
    s.sender = StandingSender::Prepare(
        stubs_.For(peer, context.get()), context,
        [this, dst, token](const StandingSender* sender,
                           const grpc::Status& status) {
          return StandingEnded(dst, sender, token, status);
        },
        [this] { inflight_.Finished(); });
    opened = s.sender;
  }
  opened->Start();
  return opened;
}

absl::Status Exchange::StandingEnded(int dst, const StandingSender* sender,
                                     InflightCalls::Token token,
                                     const grpc::Status& status) {
  const absl::Status failure = inflight_.Remove(token);
  {
    absl::MutexLock lock(&mu_);
    auto it = standing_.find(dst);
    if (it != standing_.end() && it->second.sender.get() == sender) {
      standing_.erase(it);
    }
  }
  if (!failure.ok()) return failure;
  if (!status.ok()) return FromGrpcStatus(status);
  return absl::UnavailableError(
      absl::StrCat("the stream to ", directory_->at(dst).name, " ended"));
}

void Exchange::AttemptOwn(std::shared_ptr<Outgoing> out, int attempt) {
  auto context = std::make_shared<grpc::ClientContext>();
  context->set_deadline(WallDeadline(*timers_->clock(), out->deadline));
  AddTraceparent(context.get(), out->trace);
  InflightCalls::Token token = inflight_.Add(WorkerNode(out->dst), context);
  auto* stream = new SendStream(
      out->frames, context,
      [this, out, attempt, token, context](const grpc::Status& s,
                                           bool written) {
        absl::Status failure = inflight_.Remove(token);
        // Unanswered: the stream broke (UNAVAILABLE) or was cancelled here
        // (FailNode) after the last frame went out; a receiver's refusal is
        // an answer.
        const bool unanswered =
            !failure.ok() || s.error_code() == grpc::StatusCode::UNAVAILABLE;
        Settle(out, attempt, failure.ok() ? FromGrpcStatus(s) : failure,
               failure.ok() && MarkedBackpressure(*context),
               written && unanswered);
        inflight_.Finished();
      });
  stream->Start(stubs_.For(directory_->at(out->dst), context.get()));
}

void Exchange::Settle(const std::shared_ptr<Outgoing>& out, int attempt,
                      absl::Status status, bool backpressure,
                      bool written_unanswered) {
  backpressure =
      backpressure && status.code() == absl::StatusCode::kResourceExhausted;
  absl::Duration backoff =
      std::min(kFirstBackoff * (1 << std::min(attempt, 10)), kMaxBackoff);
  if (backpressure && timers_->clock()->Now() + backoff < out->deadline) {
    // The receiver's buffer is full: wait and send again (backpressure).
    timers_->RunAfter(backoff,
                      [this, out, attempt] { Attempt(out, attempt + 1); });
    return;
  }
  if (backpressure) {
    // Still no room at the deadline: the receiver never took the message.
    status = absl::DeadlineExceededError(absl::StrCat(
        out->dst_name, " did not take the message before the deadline (",
        status.message(), ")"));
  }
  // A failure names the death behind it, if there is one; a message the
  // receiver took stays delivered even if it died since (its process may
  // exit right after a receive: a rank's last message).
  if (!status.ok()) {
    if (auto down = membership_->DownReason(WorkerNode(out->dst))) {
      status = *down;
    }
  }
  if (!status.ok() && written_unanswered && !stopped_) {
    return SettleWritten(out, std::move(status));
  }
  out->done.Set(status.ok() ? absl::StatusOr<Done>(Done())
                            : absl::StatusOr<Done>(status));
}

namespace {

// Settles a message once: sent, or failed with `failure`, also when it is
// dropped unsettled (a probe dropped as the timers stop), so no sender waits
// on a promise nobody will keep.
template <typename Out>
class Settlement {
 public:
  Settlement(std::shared_ptr<Out> out, absl::Status failure)
      : out_(std::move(out)), failure_(std::move(failure)) {}
  Settlement(Settlement&&) = default;
  Settlement& operator=(Settlement&&) = delete;
  ~Settlement() {
    if (out_ != nullptr) out_->done.Set(failure_);
  }
  void Set(bool sent) {
    std::shared_ptr<Out> out = std::move(out_);
    out->done.Set(sent ? absl::StatusOr<Done>(Done())
                       : absl::StatusOr<Done>(failure_));
  }

 private:
  std::shared_ptr<Out> out_;
  absl::Status failure_;
};

}  // namespace

// The stream ended without answering a message written out whole: its
// receiver may have taken it and then exited before answering (a rank's
// last message; torch's tutorials end so, and a process that exits
// answers nothing). If the receiver's process is gone, the message counts
// as sent, as gloo's send does once written: nobody is left to receive it,
// and its sender must not fail for the receiver's exit. If the receiver's
// host still listens there (a live process: the stream broke for another
// reason), or does not answer, the failure stands.
void Exchange::SettleWritten(const std::shared_ptr<Outgoing>& out,
                             absl::Status failure) {
  probe_->Probe(directory_->at(out->dst).address,
                [settle = Settlement<Outgoing>(out, std::move(failure))](
                    Listener answer) mutable {
                  settle.Set(answer == Listener::kRefused);
                });
}

// ---- Receiving ----

class Exchange::ReceiveStream final : public grpc::ServerGenericBidiReactor {
 public:
  // From `sender` (SenderOf: -1 unchecked), which took one of the open
  // streams for `peer` (given back when the stream is done).
  ReceiveStream(Exchange* exchange, grpc::GenericCallbackServerContext* context,
                int sender, std::string peer)
      : exchange_(exchange),
        context_(context),
        peer_(std::move(peer)),
        inbound_(std::make_shared<Inbound>(
            exchange->mailbox_,
            InboundOptions{exchange->self_, exchange->options_.world_size,
                           exchange->options_.ttl_ms,
                           exchange->timers_->clock(), sender})),
        id_(exchange->AddInbound(inbound_)) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The sender is done (or gone).
      Finish(ToGrpcStatus(inbound_->End()));
      return;
    }
    absl::StatusOr<Inbound::Next> next = inbound_->Take(frame_);
    frame_.Clear();
    if (!next.ok()) {
      if (IsBackpressure(next.status()))
        context_->AddTrailingMetadata(kBackpressureKey, "1");
      Finish(ToGrpcStatus(next.status()));
    } else if (*next == Inbound::Next::kDone) {
      Finish(grpc::Status::OK);
    } else {
      StartRead(&frame_);
    }
  }

  void OnDone() override {
    exchange_->RemoveInbound(id_);
    if (exchange_->options_.open_streams != nullptr) {
      exchange_->options_.open_streams->Give(peer_, 1);
    }
    delete this;
  }

 public:
  // The rank whose credential the stream presented; -1 if unchecked.
  static absl::StatusOr<int> SenderOf(
      const Authenticator* authenticator,
      const grpc::GenericCallbackServerContext& context) {
    if (authenticator == nullptr) return -1;
    FERRY_ASSIGN_OR_RETURN(std::optional<uint64_t> node,
                           authenticator->CallerNode(context));
    if (!node.has_value() && !authenticator->require_identity()) return -1;
    if (!node.has_value() || !IsWorkerNode(*node)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "collective frames come only from workers; the stream's caller is ",
          node.has_value() ? IdentityLabel(*node)
                           : "anonymous (no credential)"));
    }
    return static_cast<int>(*node);
  }

 private:
  Exchange* const exchange_;
  grpc::GenericCallbackServerContext* const context_;
  const std::string peer_;
  const std::shared_ptr<Inbound> inbound_;
  const uint64_t id_;
  grpc::ByteBuffer frame_;
};

uint64_t Exchange::AddInbound(std::shared_ptr<Inbound> inbound) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_inbound_++;
  inbound_.emplace(id, std::move(inbound));
  return id;
}

void Exchange::RemoveInbound(uint64_t id) {
  std::shared_ptr<Inbound> last;  // Destroyed (gives back bytes) unlocked.
  absl::MutexLock lock(&mu_);
  auto it = inbound_.find(id);
  if (it == inbound_.end()) return;
  last = std::move(it->second);
  inbound_.erase(it);
}

void Exchange::ExpireStale() {
  std::vector<std::shared_ptr<Inbound>> open;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, inbound] : inbound_) open.push_back(inbound);
  }
  for (const std::shared_ptr<Inbound>& inbound : open) inbound->ExpireIfStale();
}

namespace {

// Answers a stream it will not serve, at once.
class Refusal final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(grpc::Status status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

absl::Status Exchange::TakeStanding(int sender, const grpc::ByteBuffer& frame,
                                    bool* backpressure) {
  // The stream's caller was checked when it opened; a node declared gone
  // since speaks no more.
  if (sender >= 0) {
    if (auto down = membership_->DownReason(WorkerNode(sender))) return *down;
  }
  Inbound inbound(mailbox_,
                  InboundOptions{self_, options_.world_size, options_.ttl_ms,
                                 timers_->clock(), sender});
  absl::StatusOr<Inbound::Next> next = inbound.Take(frame);
  if (!next.ok()) {
    *backpressure = IsBackpressure(next.status());
    return next.status();
  }
  if (*next != Inbound::Next::kDone) {
    return absl::InvalidArgumentError(
        "collective frame: a message on a standing stream must be one frame");
  }
  return absl::OkStatus();
}

grpc::ServerGenericBidiReactor* Exchange::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() == kStandingStreamMethod) {
    absl::StatusOr<int> sender =
        ReceiveStream::SenderOf(options_.authenticator, *context);
    if (!sender.ok()) return new Refusal(ToGrpcStatus(sender.status()));
    return new StandingReceiver(
        [this, from = *sender](const grpc::ByteBuffer& frame,
                               bool* backpressure) {
          return TakeStanding(from, frame, backpressure);
        });
  }
  if (context->method() != kMethod) {
    return new Refusal(
        grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                     absl::StrCat("unknown method ", context->method())));
  }
  // Who it is first: the stream counts against its sender's share of the
  // open streams (a worker's, or an unchecked caller's connection) as well
  // as against all of them.
  absl::StatusOr<int> sender =
      ReceiveStream::SenderOf(options_.authenticator, *context);
  if (!sender.ok()) return new Refusal(ToGrpcStatus(sender.status()));
  std::string peer = *sender >= 0
                         ? IdentityLabel(WorkerNode(*sender))
                         : absl::StrCat("the caller at ", context->peer());
  if (const std::shared_ptr<PeerBudget>& open = options_.open_streams) {
    if (absl::Status taken = open->Take(peer, 1); !taken.ok()) {
      return new Refusal(ToGrpcStatus(taken));
    }
  }
  // Gives the place back when done.
  return new ReceiveStream(this, context, *sender, std::move(peer));
}

}  // namespace ferry
