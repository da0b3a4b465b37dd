#include "rpc/membership/etcd/etcd_keepalive.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "rpc/base/timers.h"
#include "rpc/membership/etcd/callback_gate.h"
#include "rpc/membership/etcd/etcd_connection.h"
#include "rpc/membership/etcd/etcd_status.h"

namespace ferry {
namespace {

// How long Stop() waits for a running on_lost on another thread.
constexpr absl::Duration kStopWait = absl::Seconds(5);
// Renewals sent and not yet answered that are remembered (more means the
// stream is stuck, which the tick notices anyway).
constexpr size_t kMaxUnanswered = 8;

}  // namespace

class KeepAliveStream;

// The state of one kept lease across the streams that renew it. Tracked by
// the connection from Start until it ended (stopped or lost) and its last
// stream is done.
class LeaseKeeper : public EtcdTask,
                    public std::enable_shared_from_this<LeaseKeeper> {
 public:
  LeaseKeeper(std::shared_ptr<EtcdConnection> connection, EtcdLease lease,
              EtcdLeaseLostCallback on_lost);

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops renewing (EtcdTask: also what the client's Stop does).
  void Cancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Time expires_at() const ABSL_LOCKS_EXCLUDED(mu_);
  bool lost() const ABSL_LOCKS_EXCLUDED(mu_);

  // From the stream.
  void OnResponse(const KeepAliveStream* stream, int endpoint,
                  int64_t ttl_seconds) ABSL_LOCKS_EXCLUDED(mu_);
  void OnStreamDone(const KeepAliveStream* stream, int endpoint,
                    const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void OpenStream() ABSL_LOCKS_EXCLUDED(mu_);
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);
  void Renew(const std::shared_ptr<KeepAliveStream>& stream)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CheckExpiry() ABSL_LOCKS_EXCLUDED(mu_);
  void ScheduleExpiryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RenewTokenThenReopen(uint64_t generation, absl::Duration pause);
  void ReopenLater(absl::Duration delay) ABSL_LOCKS_EXCLUDED(mu_);
  void Lose(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends everything; returns the stream to cancel outside the lock.
  std::shared_ptr<KeepAliveStream> EndLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeUntrack() ABSL_LOCKS_EXCLUDED(mu_);
  std::string Name() const;

  // Constant after construction.
  const std::shared_ptr<EtcdConnection> connection_;
  const EtcdLease lease_;
  const absl::Duration period_;  // Between renewals: TTL/3.
  CallbackGate gate_;

  mutable absl::Mutex mu_;
  EtcdLeaseLostCallback on_lost_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<KeepAliveStream> stream_ ABSL_GUARDED_BY(mu_);
  uint64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;  // Its token's.
  // When each unanswered renewal on stream_ was sent, oldest first.
  std::deque<absl::Time> unanswered_ ABSL_GUARDED_BY(mu_);
  absl::Time expires_at_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  int failures_ ABSL_GUARDED_BY(mu_) = 0;  // Streams broken in a row.
  Timers::TimerId tick_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId expiry_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId reopen_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // Stopped or lost.
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool untracked_ ABSL_GUARDED_BY(mu_) = false;
};

// One LeaseKeepAlive stream: renewals go out one at a time when the keeper
// asks, answers go to the keeper. A hold keeps the stream open for writes
// until it closes; the hold is released only when no write is in flight,
// so StartWrite never races OnDone.
class KeepAliveStream final
    : public grpc::ClientBidiReactor<etcdserverpb::LeaseKeepAliveRequest,
                                     etcdserverpb::LeaseKeepAliveResponse> {
 public:
  KeepAliveStream(std::weak_ptr<LeaseKeeper> keeper, int endpoint,
                  int64_t lease_id,
                  std::shared_ptr<grpc::ClientContext> context)
      : keeper_(std::move(keeper)),
        endpoint_(endpoint),
        context_(std::move(context)) {
    request_.set_id(lease_id);
  }

  grpc::ClientContext* context() { return context_.get(); }

  // Opens the stream; it keeps itself alive until OnDone.
  void Start(const EtcdStubs& stubs, std::shared_ptr<KeepAliveStream> self)
      ABSL_LOCKS_EXCLUDED(mu_) {
    self_ = std::move(self);
    {
      absl::MutexLock lock(&mu_);
      holding_ = true;
    }
    stubs.lease->async()->LeaseKeepAlive(context_.get(), this);
    AddHold();  // After binding to the call, before StartCall.
    StartRead(&response_);
    StartCall();
    absl::MutexLock lock(&mu_);
    started_ = true;
  }

  // Sends one renewal; false if one is still in flight or the stream is
  // closing.
  bool Send() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      // The keeper publishes a stream before starting it; a renewal due
      // in between waits for the next tick.
      if (!started_ || closing_ || writing_) return false;
      writing_ = true;
    }
    StartWrite(&request_);
    return true;
  }

  void Cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Close();
      return;
    }
    if (auto keeper = keeper_.lock()) {
      keeper->OnResponse(this, endpoint_, response_.ttl());
    }
    StartRead(&response_);
  }

  void OnWriteDone(bool ok) override {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) closing_ = true;
      release = closing_ && holding_;
      if (release) holding_ = false;
    }
    if (release) RemoveHold();
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<KeepAliveStream> self = std::move(self_);
    if (auto keeper = keeper_.lock()) {
      keeper->OnStreamDone(this, endpoint_, status);
    }
  }  // `self` may have been the last reference.

 private:
  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      release = holding_ && !writing_;
      if (release) holding_ = false;
    }
    if (release) RemoveHold();
  }

  const std::weak_ptr<LeaseKeeper> keeper_;
  const int endpoint_;
  // From EtcdConnection::NewContext; destroyed with the stream.
  const std::shared_ptr<grpc::ClientContext> context_;
  etcdserverpb::LeaseKeepAliveRequest request_;  // Same for every renewal.
  etcdserverpb::LeaseKeepAliveResponse response_;
  std::shared_ptr<KeepAliveStream> self_;  // Until OnDone.

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

// ---- LeaseKeeper ----

LeaseKeeper::LeaseKeeper(std::shared_ptr<EtcdConnection> connection,
                         EtcdLease lease, EtcdLeaseLostCallback on_lost)
    : connection_(std::move(connection)),
      lease_(lease),
      period_(lease.ttl / 3),
      on_lost_(std::move(on_lost)),
      expires_at_(lease.granted_at + lease.ttl) {}

std::string LeaseKeeper::Name() const {
  return absl::StrCat("etcd lease ", lease_.id, " (TTL ",
                      absl::FormatDuration(lease_.ttl), ")");
}

void LeaseKeeper::Start() {
  if (!connection_->Track(shared_from_this())) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    untracked_ = true;
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    ScheduleExpiryLocked();
  }
  OpenStream();
}

void LeaseKeeper::OpenStream() {
  std::shared_ptr<KeepAliveStream> stream;
  int endpoint;
  EtcdConnection::Token token;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    endpoint = connection_->current();
    stream = std::make_shared<KeepAliveStream>(
        weak_from_this(), endpoint, lease_.id, connection_->NewContext());
    stream_ = stream;
    unanswered_.clear();
    token = connection_->token();
    stream_generation_ = token.generation;
  }
  connection_->Prepare(stream->context(), absl::InfiniteFuture(), token.value,
                       /*stream=*/true);
  stream->Start(connection_->stubs(endpoint), stream);
  Tick();
}

// Renews now and comes back after a period. A renewal still unanswered
// after a whole period means the stream is stuck: it is cancelled, and
// reopened when it is done.
void LeaseKeeper::Tick() {
  std::shared_ptr<KeepAliveStream> stream;
  bool stuck = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || stream_ == nullptr) return;
    stream = stream_;
    stuck = !unanswered_.empty() &&
            connection_->Now() - unanswered_.front() > period_;
    if (tick_timer_ != 0) connection_->timers()->Cancel(tick_timer_);
    std::weak_ptr<LeaseKeeper> weak = weak_from_this();
    tick_timer_ = connection_->timers()->RunAfter(period_, [weak] {
      if (auto self = weak.lock()) self->Tick();
    });
  }
  if (stuck) {
    stream->Cancel();
  } else {
    Renew(stream);
  }
}

void LeaseKeeper::Renew(const std::shared_ptr<KeepAliveStream>& stream) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || stream != stream_) return;
    // Recorded before the write: its answer cannot come earlier.
    unanswered_.push_back(connection_->Now());
  }
  if (stream->Send()) return;
  absl::MutexLock lock(&mu_);
  if (stream == stream_ && !unanswered_.empty()) unanswered_.pop_back();
}

void LeaseKeeper::OnResponse(const KeepAliveStream* stream, int endpoint,
                             int64_t ttl_seconds) {
  absl::Status lost;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || stream != stream_.get()) return;
    if (ttl_seconds <= 0) {
      lost = absl::NotFoundError(absl::StrCat(
          Name(), " no longer exists (expired or revoked): etcd ",
          connection_->address(endpoint), " renewed it with TTL 0"));
    } else {
      absl::Time sent = connection_->Now();
      if (!unanswered_.empty()) {
        sent = unanswered_.front();
        unanswered_.pop_front();
      }
      expires_at_ = std::max(expires_at_, sent + absl::Seconds(ttl_seconds));
      failures_ = 0;
      ScheduleExpiryLocked();
      while (unanswered_.size() > kMaxUnanswered) unanswered_.pop_front();
    }
  }
  if (!lost.ok()) Lose(lost);
}

void LeaseKeeper::ScheduleExpiryLocked() {
  if (ended_) return;
  if (expiry_timer_ != 0) connection_->timers()->Cancel(expiry_timer_);
  std::weak_ptr<LeaseKeeper> weak = weak_from_this();
  expiry_timer_ =
      connection_->timers()->RunAfter(expires_at_ - connection_->Now(), [weak] {
        if (auto self = weak.lock()) self->CheckExpiry();
      });
}

void LeaseKeeper::CheckExpiry() {
  absl::Status lost;
  {
    absl::MutexLock lock(&mu_);
    expiry_timer_ = 0;
    if (ended_) return;
    if (connection_->Now() < expires_at_) {
      ScheduleExpiryLocked();  // Renewed meanwhile, or an early wake-up.
      return;
    }
    lost = absl::DeadlineExceededError(absl::StrCat(
        Name(), " was not renewed before it ran out (endpoints ",
        connection_->all_endpoints(), ")",
        last_error_.ok() ? "" : "; last error: ", last_error_.message()));
  }
  Lose(lost);
}

void LeaseKeeper::OnStreamDone(const KeepAliveStream* stream, int endpoint,
                               const grpc::Status& status) {
  bool ended;
  int failures = 0;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    if (stream != stream_.get()) return;
    generation = stream_generation_;
    stream_.reset();
    unanswered_.clear();
    if (tick_timer_ != 0) connection_->timers()->Cancel(tick_timer_);
    tick_timer_ = 0;
    ended = ended_;
    if (!ended) {
      failures = ++failures_;
      last_error_ =
          EtcdError(status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                               "the stream was closed")
                                : status,
                    connection_->address(endpoint),
                    absl::StrCat("LeaseKeepAlive ", lease_.id));
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
  connection_->FailOver(endpoint);
  ReopenLater(pause);
}

// Reopens at once with a new token, or after `pause` if none came.
void LeaseKeeper::RenewTokenThenReopen(uint64_t generation,
                                       absl::Duration pause) {
  std::weak_ptr<LeaseKeeper> weak = weak_from_this();
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

void LeaseKeeper::ReopenLater(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  std::weak_ptr<LeaseKeeper> weak = weak_from_this();
  reopen_timer_ = connection_->timers()->RunAfter(delay, [weak] {
    if (auto self = weak.lock()) self->OpenStream();
  });
}

void LeaseKeeper::Lose(const absl::Status& reason) {
  EtcdLeaseLostCallback on_lost;
  std::shared_ptr<KeepAliveStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    lost_ = true;
    on_lost = std::move(on_lost_);
    stream = EndLocked();
  }
  if (stream != nullptr) stream->Cancel();
  if (on_lost && gate_.Enter()) {
    std::move(on_lost)(reason);
    gate_.Exit();
  }
  MaybeUntrack();
}

std::shared_ptr<KeepAliveStream> LeaseKeeper::EndLocked() {
  ended_ = true;
  for (Timers::TimerId* timer :
       {&tick_timer_, &expiry_timer_, &reopen_timer_}) {
    if (*timer != 0) connection_->timers()->Cancel(*timer);
    *timer = 0;
  }
  return stream_;
}

void LeaseKeeper::Cancel() {
  std::shared_ptr<KeepAliveStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (!ended_) stream = EndLocked();
  }
  if (stream != nullptr) stream->Cancel();
  MaybeUntrack();
}

void LeaseKeeper::Stop() {
  Cancel();
  gate_.Close(kStopWait);
}

void LeaseKeeper::MaybeUntrack() {
  {
    absl::MutexLock lock(&mu_);
    if (untracked_ || !ended_ || stream_ != nullptr) return;
    untracked_ = true;
  }
  connection_->Untrack(this);
}

absl::Time LeaseKeeper::expires_at() const {
  absl::MutexLock lock(&mu_);
  return expires_at_;
}

bool LeaseKeeper::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

// ---- EtcdKeepAlive ----

std::unique_ptr<EtcdKeepAlive> EtcdKeepAlive::Start(
    std::shared_ptr<EtcdConnection> connection, EtcdLease lease,
    EtcdLeaseLostCallback on_lost) {
  auto keeper = std::make_shared<LeaseKeeper>(std::move(connection), lease,
                                              std::move(on_lost));
  keeper->Start();
  return std::unique_ptr<EtcdKeepAlive>(new EtcdKeepAlive(lease.id, keeper));
}

EtcdKeepAlive::EtcdKeepAlive(int64_t lease_id,
                             std::shared_ptr<LeaseKeeper> keeper)
    : lease_id_(lease_id), keeper_(std::move(keeper)) {}

EtcdKeepAlive::~EtcdKeepAlive() { Stop(); }

void EtcdKeepAlive::Stop() { keeper_->Stop(); }

absl::Time EtcdKeepAlive::expires_at() const { return keeper_->expires_at(); }

bool EtcdKeepAlive::lost() const { return keeper_->lost(); }

}  // namespace ferry
