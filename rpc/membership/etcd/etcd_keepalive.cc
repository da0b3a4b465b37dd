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
#include "rpc/membership/etcd/etcd_connection.h"
#include "rpc/membership/etcd/resumable_stream.h"

namespace ferry {
namespace {

// Renewals sent and not yet answered that are remembered (more means the
// stream is stuck, which the tick notices anyway).
constexpr size_t kMaxUnanswered = 8;

}  // namespace

class KeepAliveStream;

// The state of one kept lease across the streams that renew it
// (resumable_stream.h); it ends by End() when the lease is lost.
class LeaseKeeper final : public ResumableStream {
 public:
  LeaseKeeper(std::shared_ptr<EtcdConnection> connection, EtcdLease lease,
              EtcdLeaseLostCallback on_lost);

  absl::Time expires_at() const ABSL_LOCKS_EXCLUDED(mu_);
  bool lost() const ABSL_LOCKS_EXCLUDED(mu_);

  // From the stream.
  void OnResponse(const KeepAliveStream* stream, int64_t ttl_seconds)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::string StreamName() const override;
  std::shared_ptr<EtcdStream> NewStreamLocked(int endpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStreamOpened() override { Tick(); }
  void OnStreamGoneLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnEndLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void Tick() ABSL_LOCKS_EXCLUDED(mu_);
  void Renew(const std::shared_ptr<KeepAliveStream>& stream)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CheckExpiry() ABSL_LOCKS_EXCLUDED(mu_);
  void ScheduleExpiryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Name() const;

  // Constant after construction.
  const EtcdLease lease_;
  const absl::Duration period_;  // Between renewals: TTL/3.

  // The current stream (stream_), as what it is.
  std::shared_ptr<KeepAliveStream> renewing_ ABSL_GUARDED_BY(mu_);
  // When each unanswered renewal on it was sent, oldest first.
  std::deque<absl::Time> unanswered_ ABSL_GUARDED_BY(mu_);
  absl::Time expires_at_ ABSL_GUARDED_BY(mu_);
  Timers::TimerId tick_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId expiry_timer_ ABSL_GUARDED_BY(mu_) = 0;
};

// One LeaseKeepAlive stream: renewals go out one at a time when the keeper
// asks, answers go to the keeper. A hold keeps the stream open for writes
// until it closes; the hold is released only when no write is in flight,
// so StartWrite never races OnDone.
class KeepAliveStream final
    : public EtcdStream,
      public grpc::ClientBidiReactor<etcdserverpb::LeaseKeepAliveRequest,
                                     etcdserverpb::LeaseKeepAliveResponse> {
 public:
  KeepAliveStream(std::weak_ptr<LeaseKeeper> keeper, int endpoint,
                  int64_t lease_id,
                  std::shared_ptr<grpc::ClientContext> context)
      : EtcdStream(keeper, endpoint, std::move(context)),
        keeper_(std::move(keeper)) {
    request_.set_id(lease_id);
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

  void OnReadDone(bool ok) override {
    if (!ok) {
      Close();
      return;
    }
    if (auto keeper = keeper_.lock()) keeper->OnResponse(this, response_.ttl());
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

  void OnDone(const grpc::Status& status) override { Done(status); }

 private:
  void Begin(const EtcdStubs& stubs) override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      holding_ = true;
    }
    stubs.lease->async()->LeaseKeepAlive(context(), this);
    AddHold();  // After binding to the call, before StartCall.
    StartRead(&response_);
    StartCall();
    absl::MutexLock lock(&mu_);
    started_ = true;
  }

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
  etcdserverpb::LeaseKeepAliveRequest request_;  // Same for every renewal.
  etcdserverpb::LeaseKeepAliveResponse response_;

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

// ---- LeaseKeeper ----

LeaseKeeper::LeaseKeeper(std::shared_ptr<EtcdConnection> connection,
                         EtcdLease lease, EtcdLeaseLostCallback on_lost)
    : ResumableStream(std::move(connection), std::move(on_lost)),
      lease_(lease),
      period_(lease.ttl / 3),
      expires_at_(lease.granted_at + lease.ttl) {}

std::string LeaseKeeper::Name() const {
  return absl::StrCat("etcd lease ", lease_.id, " (TTL ",
                      absl::FormatDuration(lease_.ttl), ")");
}

std::string LeaseKeeper::StreamName() const {
  return absl::StrCat("LeaseKeepAlive ", lease_.id);
}

std::shared_ptr<EtcdStream> LeaseKeeper::NewStreamLocked(int endpoint) {
  // The lease's expiry is watched from the first stream on.
  if (expiry_timer_ == 0) ScheduleExpiryLocked();
  renewing_ = std::make_shared<KeepAliveStream>(
      WeakSelf<LeaseKeeper>(), endpoint, lease_.id, connection_->NewContext());
  unanswered_.clear();
  return renewing_;
}

// Renews now and comes back after a period. A renewal still unanswered
// after a whole period means the stream is stuck: it is cancelled, and
// reopened when it is done.
void LeaseKeeper::Tick() {
  std::shared_ptr<KeepAliveStream> stream;
  bool stuck = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || renewing_ == nullptr) return;
    stream = renewing_;
    stuck = !unanswered_.empty() &&
            connection_->Now() - unanswered_.front() > period_;
    CancelTimerLocked(&tick_timer_);
    std::weak_ptr<LeaseKeeper> weak = WeakSelf<LeaseKeeper>();
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
    if (ended_ || stream != renewing_) return;
    // Recorded before the write: its answer cannot come earlier.
    unanswered_.push_back(connection_->Now());
  }
  if (stream->Send()) return;
  absl::MutexLock lock(&mu_);
  if (stream == renewing_ && !unanswered_.empty()) unanswered_.pop_back();
}

void LeaseKeeper::OnResponse(const KeepAliveStream* stream,
                             int64_t ttl_seconds) {
  absl::Status lost;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || stream != renewing_.get()) return;
    if (ttl_seconds <= 0) {
      lost = absl::NotFoundError(absl::StrCat(
          Name(), " no longer exists (expired or revoked): etcd ",
          connection_->address(stream->endpoint()), " renewed it with TTL 0"));
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
  if (!lost.ok()) End(lost);
}

void LeaseKeeper::ScheduleExpiryLocked() {
  if (ended_) return;
  CancelTimerLocked(&expiry_timer_);
  std::weak_ptr<LeaseKeeper> weak = WeakSelf<LeaseKeeper>();
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
  End(lost);
}

void LeaseKeeper::OnStreamGoneLocked() {
  renewing_.reset();
  unanswered_.clear();
  CancelTimerLocked(&tick_timer_);
}

void LeaseKeeper::OnEndLocked() {
  CancelTimerLocked(&tick_timer_);
  CancelTimerLocked(&expiry_timer_);
}

absl::Time LeaseKeeper::expires_at() const {
  absl::MutexLock lock(&mu_);
  return expires_at_;
}

bool LeaseKeeper::lost() const {
  absl::MutexLock lock(&mu_);
  return failed_;
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
