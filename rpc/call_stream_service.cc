#include "rpc/call_stream_service.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/chunked_message.h"
#include "rpc/shm_message.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

// What a stream's expiry timer may look at, even after the stream is gone:
// whoever sets `finished` (first) calls Finish, and only then may gRPC
// delete the stream, so the timer touches the stream only if it claimed
// the finish itself.
struct Guard {
  absl::Mutex mu;
  bool finished ABSL_GUARDED_BY(mu) = false;
  bool received ABSL_GUARDED_BY(mu) = false;  // The request came whole.
};

// One streamed call at the server: assembles the request, hands it to the
// CallService, streams the reply back.
class ServerStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public CallResponder {
 public:
  struct Setup {
    CallService* calls;
    grpc::CallbackServerContext* context;
    std::shared_ptr<PeerBudget> budget;
    std::string peer;
    // The caller is on this host's local socket: its messages may come in
    // memory files (rpc/shm_message.h).
    bool local = false;
    Timers* timers;
    // One taken for this stream, for `peer`.
    std::shared_ptr<PeerBudget> open_streams;
  };

  explicit ServerStream(Setup setup);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  void Respond(grpc::ByteBuffer* reply, const grpc::Status& status,
               std::function<void()> ended) override;
  void CancelUnsent() override { context_->TryCancel(); }
  void OnCancelled(std::function<void()> f) override;

 private:
  // Ends the stream with `status`, once (later calls do nothing).
  void FinishOnce(const grpc::Status& status);
  void FinishWith(const absl::Status& status) {
    FinishOnce(ToGrpcStatus(Annotate(status, calls_->worker_name())));
  }
  // The expiry timer's: ends `stream` if its request is still not whole
  // and nobody finished it. `guard` is the stream's, and outlives it.
  static void Expire(ServerStream* stream, const std::shared_ptr<Guard>& guard);
  absl::Status Expired() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(guard_->mu);
  void WriteNext();
  // Writes `reply` into the file the request offered, if it can.
  bool ReplyInFile(const grpc::ByteBuffer& reply);

  CallService* const calls_;
  grpc::CallbackServerContext* const context_;
  Timers* const timers_;
  const std::shared_ptr<PeerBudget> open_streams_;
  const std::string peer_;  // Whose stream it is (before request_ moves it).
  const int64_t ttl_ms_;
  const bool local_;
  const std::shared_ptr<Guard> guard_ = std::make_shared<Guard>();
  // Read by the timer (under guard_->mu) and the reads.
  ChunkAssembler request_ ABSL_GUARDED_BY(guard_->mu);
  grpc::ByteBuffer in_;
  ChunkWriter reply_;
  // The caller's file for the reply (set before the request is served).
  std::optional<proto::ShmRef> reply_to_;
  // Set after the first read started (which may complete before).
  std::atomic<Timers::TimerId> expiry_{0};
  // Set by Respond, run by OnDone (after the stream finished).
  std::function<void()> ended_;

  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_cancel_ ABSL_GUARDED_BY(mu_);
};

ServerStream::ServerStream(Setup setup)
    : calls_(setup.calls),
      context_(setup.context),
      timers_(setup.timers),
      open_streams_(std::move(setup.open_streams)),
      peer_(setup.peer),
      ttl_ms_(setup.calls->limits().stream_ttl_ms),
      local_(setup.local),
      request_(
          "request", setup.calls->limits().max_message_bytes,
          std::move(setup.budget), std::move(setup.peer),
          setup.local ? ChunkAssembler::FileReader(ReadPeerFile) : nullptr) {
  StartRead(&in_);
  // From the stream's start: a stream that never sends its head expires
  // too.
  expiry_ = timers_->RunAfter(absl::Milliseconds(ttl_ms_),
                              [this, guard = guard_] { Expire(this, guard); });
}

absl::Status ServerStream::Expired() const {
  return absl::DeadlineExceededError(absl::StrCat(
      request_.Progress(), " within ", ttl_ms_,
      " ms of the stream's start; the rest never came, ",
      LimitNote(absl::StrCat(ttl_ms_, " ms"), "stream_ttl_ms", ttl_ms_)));
}

// The stream may be gone (finished by its call, deleted by gRPC): it is
// touched only while `guard` shows nobody finished it, and then claimed, so
// gRPC keeps it until this Finish. (The analysis cannot see that `guard` is
// stream->guard_.)
void ServerStream::Expire(ServerStream* stream,
                          const std::shared_ptr<Guard>& guard)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  absl::Status expired;
  {
    absl::MutexLock lock(&guard->mu);
    if (guard->finished || guard->received) return;
    guard->finished = true;
    expired = stream->Expired();
  }
  stream->Finish(
      ToGrpcStatus(Annotate(expired, stream->calls_->worker_name())));
}

void ServerStream::OnReadDone(bool ok) {
  absl::Status added;
  bool complete = false;
  {
    absl::MutexLock lock(&guard_->mu);
    if (guard_->finished) return;  // Expired: the stream is over.
    if (!ok) {  // The caller half-closed early, or went away.
      added = absl::InvalidArgumentError(
          absl::StrCat(request_.Progress(), " when the stream ended"));
    } else {
      added = request_.Add(&in_);
      complete = added.ok() && request_.complete();
      guard_->received = complete;
    }
  }
  if (!added.ok()) {
    FinishWith(added);
    return;
  }
  if (!complete) {
    StartRead(&in_);
    return;
  }
  timers_->Cancel(expiry_);
  grpc::ByteBuffer request;
  {
    absl::MutexLock lock(&guard_->mu);
    request = request_.Take();
    if (const proto::ShmRef* to = request_.reply_to();
        to != nullptr && local_) {
      reply_to_ = *to;
    }
  }
  calls_->Serve(context_, request, this);
}

void ServerStream::Respond(grpc::ByteBuffer* reply, const grpc::Status& status,
                           std::function<void()> ended) {
  // Before anything that may finish the stream (then OnDone may run).
  ended_ = std::move(ended);
  if (!status.ok()) {
    FinishOnce(status);
    return;
  }
  if (!ReplyInFile(*reply)) reply_.Reset(*reply);
  reply->Clear();
  WriteNext();
}

bool ServerStream::ReplyInFile(const grpc::ByteBuffer& reply) {
  if (!reply_to_.has_value()) return false;  // None, or not a local caller.
  proto::StreamHead head = HeadOf(reply);
  absl::StatusOr<proto::ShmRef> written =
      WritePeerFile(*reply_to_, reply, head.align());
  // Not written (this process cannot open the caller's files): the reply
  // goes as frames, and the caller keeps sending its requests so too.
  if (!written.ok()) return false;
  *head.mutable_shm() = *std::move(written);
  reply_.Reset(head, grpc::ByteBuffer());
  return true;
}

void ServerStream::WriteNext() {
  grpc::ByteBuffer* chunk = reply_.Next();
  if (chunk == nullptr) {
    FinishOnce(grpc::Status::OK);
  } else {
    StartWrite(chunk);
  }
}

void ServerStream::OnWriteDone(bool ok) {
  if (!ok) {  // The stream broke: the caller went away.
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED,
                            "the caller went away during the reply"));
    return;
  }
  WriteNext();
}

void ServerStream::OnCancel() {
  std::function<void()> f;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    f = std::move(on_cancel_);
  }
  if (f) f();
}

void ServerStream::OnCancelled(std::function<void()> f) {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_) {
      on_cancel_ = std::move(f);
      return;
    }
  }
  f();  // Already cancelled: now, outside the lock.
}

void ServerStream::OnDone() {
  timers_->Cancel(expiry_);
  if (open_streams_ != nullptr) open_streams_->Give(peer_, 1);
  if (ended_) ended_();
  delete this;
}

void ServerStream::FinishOnce(const grpc::Status& status) {
  {
    absl::MutexLock lock(&guard_->mu);
    if (guard_->finished) return;
    guard_->finished = true;
  }
  Finish(status);
}

// Answers a stream it will not serve, at once.
class Refusal final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// Who the stream's bytes are counted against: the node its credential
// proves, or (no credential) its connection. A credential that proves
// nobody refuses the stream before it sends a byte.
absl::StatusOr<std::string> PeerOf(const CallService& calls,
                                   const grpc::CallbackServerContext& context) {
  if (const Authenticator* auth = calls.authenticator(); auth != nullptr) {
    FERRY_ASSIGN_OR_RETURN(std::optional<uint64_t> node,
                           auth->CallerNode(context));
    if (node.has_value()) return IdentityLabel(*node);
  }
  return absl::StrCat("the caller at ", context.peer());
}

bool OnLocalSocket(const grpc::CallbackServerContext& context) {
  const std::string peer = context.peer();
  return absl::StartsWith(peer, "unix:") ||
         absl::StartsWith(peer, "unix-abstract:");
}

}  // namespace

CallStreamService::CallStreamService(CallService* calls, Options options)
    : BoundedService(ServiceOf<proto::Chunk>("CallStream"), calls->limits(),
                     calls->worker_name()),
      calls_(calls),
      options_(std::move(options)),
      budget_(std::make_shared<PeerBudget>(PeerBudget::Options{
          .max_bytes = calls->limits().grpc_memory_bytes,
          .max_bytes_per_peer = calls->limits().max_stream_bytes_per_peer})) {
  ReadsRaw("Call");
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CallStreamService::Call(grpc::CallbackServerContext* context) {
  // Who it is first: a stream counts against its caller's share of the
  // open streams as well as against all of them.
  absl::StatusOr<std::string> peer = PeerOf(*calls_, *context);
  if (!peer.ok()) {
    return new Refusal(
        ToGrpcStatus(Annotate(peer.status(), calls_->worker_name())));
  }
  const std::shared_ptr<PeerBudget>& open = options_.open_streams;
  if (open != nullptr) {
    if (absl::Status taken = open->Take(*peer, 1); !taken.ok()) {
      return new Refusal(ToGrpcStatus(Annotate(taken, calls_->worker_name())));
    }
  }
  return new ServerStream(
      {.calls = calls_,
       .context = context,
       .budget = budget_,
       .peer = *std::move(peer),
       .local = options_.shared_memory && OnLocalSocket(*context),
       .timers = options_.timers,
       .open_streams = open});
}

}  // namespace ferry
