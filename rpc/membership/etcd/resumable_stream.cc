#include "rpc/membership/etcd/resumable_stream.h"

#include <utility>

#include "rpc/membership/etcd/etcd_status.h"

namespace ferry {
namespace {

// How long Stop() waits for a running callback on another thread.
constexpr absl::Duration kStopWait = absl::Seconds(5);

}  // namespace

// ---- EtcdStream ----

EtcdStream::EtcdStream(std::weak_ptr<ResumableStream> task, int endpoint,
                       std::shared_ptr<grpc::ClientContext> context)
    : task_(std::move(task)),
      endpoint_(endpoint),
      context_(std::move(context)) {}

void EtcdStream::Open(const EtcdStubs& stubs,
                      std::shared_ptr<EtcdStream> self) {
  self_ = std::move(self);
  Begin(stubs);
}

void EtcdStream::Done(const grpc::Status& status) {
  std::shared_ptr<EtcdStream> self = std::move(self_);
  if (auto task = task_.lock()) task->OnStreamDone(this, status);
}  // `self` may have been the last reference.

// ---- ResumableStream ----

ResumableStream::ResumableStream(std::shared_ptr<EtcdConnection> connection,
                                 EtcdEndCallback on_end)
    : connection_(std::move(connection)), on_end_(std::move(on_end)) {}

void ResumableStream::Start() {
  if (!connection_->Track(shared_from_this())) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    untracked_ = true;
    return;
  }
  OpenStream();
}

void ResumableStream::OpenStream() {
  std::shared_ptr<EtcdStream> stream;
  int endpoint;
  EtcdConnection::Token token;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    endpoint = connection_->current();
    token = connection_->token();
    stream = NewStreamLocked(endpoint);
    stream_ = stream;
    stream_generation_ = token.generation;
  }
  connection_->Prepare(stream->context(), absl::InfiniteFuture(), token.value,
                       /*stream=*/true);
  stream->Open(connection_->stubs(endpoint), stream);
  OnStreamOpened();
}

void ResumableStream::OnStreamDone(const EtcdStream* stream,
                                   const grpc::Status& status) {
  bool ended;
  int failures = 0;
  uint64_t generation;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    if (stream != stream_.get()) return;
    stream_.reset();
    OnStreamGoneLocked();
    ended = ended_;
    generation = stream_generation_;
    if (!ended) {
      failures = ++failures_;
      // etcd closing a stream it should keep open is a failure too.
      last_error_ = error =
          EtcdError(status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                               "the stream was closed")
                                : status,
                    connection_->address(stream->endpoint()), StreamName());
    }
  }
  if (ended) {
    MaybeUntrack();
    return;
  }
  const absl::Duration pause = connection_->Backoff(failures - 1);
  if (IsStaleToken(status) && connection_->authenticates()) {
    RenewTokenThenReopen(generation, pause);
    return;
  }
  if (IsFinal(error)) {
    End(error);
    return;
  }
  connection_->FailOver(stream->endpoint());
  ReopenLater(pause);
}

// Reopens at once with a new token, or after `pause` if none came.
void ResumableStream::RenewTokenThenReopen(uint64_t generation,
                                           absl::Duration pause) {
  std::weak_ptr<ResumableStream> weak = weak_from_this();
  connection_
      ->RenewToken(generation,
                   connection_->Now() + connection_->options().call_timeout)
      .Then([weak, pause](const absl::StatusOr<Done>& renewed) {
        auto self = weak.lock();
        if (self == nullptr) return;
        if (renewed.ok()) {
          self->OpenStream();
          return;
        }
        {
          absl::MutexLock lock(&self->mu_);
          self->last_error_ = renewed.status();
        }
        self->ReopenLater(pause);
      });
}

void ResumableStream::ReopenLater(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  std::weak_ptr<ResumableStream> weak = weak_from_this();
  reopen_timer_ = connection_->timers()->RunAfter(delay, [weak] {
    if (auto self = weak.lock()) self->OpenStream();
  });
}

void ResumableStream::End(const absl::Status& reason) {
  EtcdEndCallback on_end;
  std::shared_ptr<EtcdStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    failed_ = true;
    on_end = std::move(on_end_);
    stream = EndLocked();
  }
  if (stream != nullptr) stream->Cancel();
  if (on_end && gate_.Enter()) {
    std::move(on_end)(reason);
    gate_.Exit();
  }
  MaybeUntrack();
}

std::shared_ptr<EtcdStream> ResumableStream::EndLocked() {
  ended_ = true;
  CancelTimerLocked(&reopen_timer_);
  OnEndLocked();
  return stream_;
}

void ResumableStream::CancelTimerLocked(Timers::TimerId* timer) {
  if (*timer != 0) connection_->timers()->Cancel(*timer);
  *timer = 0;
}

void ResumableStream::Cancel() {
  std::shared_ptr<EtcdStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (!ended_) stream = EndLocked();
  }
  if (stream != nullptr) stream->Cancel();
  MaybeUntrack();
}

void ResumableStream::Stop() {
  Cancel();
  gate_.Close(kStopWait);
}

void ResumableStream::MaybeUntrack() {
  {
    absl::MutexLock lock(&mu_);
    if (untracked_ || !ended_ || stream_ != nullptr) return;
    untracked_ = true;
  }
  connection_->Untrack(this);
}

}  // namespace ferry
