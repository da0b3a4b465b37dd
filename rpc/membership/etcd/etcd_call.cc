#include "rpc/membership/etcd/etcd_call.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/membership/etcd/etcd_status.h"

namespace ferry {

EtcdCallBase::EtcdCallBase(std::shared_ptr<EtcdConnection> connection,
                           EtcdCallSpec spec, absl::Time deadline)
    : connection_(std::move(connection)),
      spec_(std::move(spec)),
      deadline_(deadline) {}

void EtcdCallBase::Begin() {
  if (!connection_->Track(shared_from_this())) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Complete(Cancelled());
    return;
  }
  Attempt();
}

void EtcdCallBase::Attempt() {
  std::shared_ptr<grpc::ClientContext> context = connection_->NewContext();
  int endpoint = 0;
  EtcdConnection::Token token;
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
    if (!cancelled) {
      endpoint = spec_.pinned_endpoint >= 0 ? spec_.pinned_endpoint
                                            : connection_->current();
      token = connection_->token();
      token_generation_ = token.generation;
      context_ = context;
      ++attempts_;
      const std::string& address = connection_->address(endpoint);
      if (std::find(tried_.begin(), tried_.end(), address) == tried_.end()) {
        tried_.push_back(address);
      }
    }
  }
  if (cancelled) {
    Finish(Cancelled());
    return;
  }
  connection_->Prepare(context.get(), deadline_,
                       spec_.authenticated ? token.value : std::string(),
                       /*stream=*/false);
  StartAttempt(connection_->stubs(endpoint), context.get(), endpoint);
}

void EtcdCallBase::AttemptDone(int endpoint, const grpc::Status& status) {
  if (status.ok()) {
    Finish(absl::OkStatus());
    return;
  }
  uint64_t generation;
  bool renew = false;
  int attempts;
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
    generation = token_generation_;
    if (IsStaleToken(status) && connection_->authenticates() &&
        !renewed_token_) {
      renewed_token_ = true;
      renew = true;
    }
    attempts = attempts_;
  }
  if (cancelled) {
    Finish(Cancelled());
    return;
  }
  if (renew) {
    RenewTokenThenRetry(generation);
    return;
  }
  FailOverOrFinish(endpoint, status, attempts);
}

void EtcdCallBase::FailOverOrFinish(int endpoint, const grpc::Status& status,
                                    int attempts) {
  const bool pinned = spec_.pinned_endpoint >= 0;
  if (!pinned && ShouldFailOver(status)) connection_->FailOver(endpoint);
  // Another try is safe when nothing could have been applied, or when
  // applying twice changes nothing (reads).
  const bool retry = !pinned && ShouldFailOver(status) &&
                     (spec_.read_only || NeverApplied(status)) &&
                     connection_->Now() < deadline_;
  if (!retry) {
    Finish(Failure(endpoint, status));
    return;
  }
  const int n = connection_->size();
  if (attempts % n != 0) {
    Attempt();  // Endpoints left to try in this round.
    return;
  }
  // Every endpoint failed: pause, unless the pause outlasts the deadline
  // (a try at the deadline could only time out, hiding this failure).
  const absl::Duration pause = connection_->Backoff(attempts / n - 1);
  if (connection_->Now() + pause >= deadline_) {
    Finish(Failure(endpoint, status));
  } else {
    RetryLater(pause);
  }
}

void EtcdCallBase::RetryLater(absl::Duration delay) {
  std::shared_ptr<EtcdCallBase> self = shared_from_this();
  bool finish = false;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) {
      finish = true;
    } else {
      // The timer holds the call. The call is tracked, so Stop() cancels
      // the timer and finishes the call.
      retry_timer_ = connection_->timers()->RunAfter(delay, [self] {
        {
          absl::MutexLock lock(&self->mu_);
          self->retry_timer_ = 0;
        }
        self->Attempt();
      });
      finish = retry_timer_ == 0;  // Timers stopped: it would never run.
    }
  }
  if (finish) Finish(Cancelled());
}

void EtcdCallBase::RenewTokenThenRetry(uint64_t generation) {
  std::shared_ptr<EtcdCallBase> self = shared_from_this();
  connection_->RenewToken(generation, deadline_)
      .Then([self](const absl::StatusOr<Done>& renewed) {
        if (renewed.ok()) {
          self->Attempt();
        } else {
          self->Finish(renewed.status());
        }
      });
}

void EtcdCallBase::Cancel() {
  std::shared_ptr<grpc::ClientContext> context;
  Timers::TimerId timer;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    cancelled_ = true;
    context = context_;
    timer = retry_timer_;
    retry_timer_ = 0;
  }
  if (timer != 0 && connection_->timers()->Cancel(timer)) {
    Finish(Cancelled());
    return;
  }
  // Otherwise an attempt is in flight (its completion finishes the call)
  // or about to start (it sees cancelled_ first).
  if (context != nullptr) context->TryCancel();
}

void EtcdCallBase::Finish(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  Complete(status);
  connection_->Untrack(this);
}

absl::Status EtcdCallBase::Failure(int endpoint,
                                   const grpc::Status& status) const {
  std::string what = spec_.what;
  {
    absl::MutexLock lock(&mu_);
    if (tried_.size() > 1) {
      absl::StrAppend(&what, " (tried ", absl::StrJoin(tried_, ", "), ")");
    }
  }
  return EtcdError(status, connection_->address(endpoint), what);
}

absl::Status EtcdCallBase::Cancelled() const {
  return absl::CancelledError(
      absl::StrCat("etcd ", connection_->all_endpoints(), ": ", spec_.what,
                   ": the etcd client is stopping"));
}

}  // namespace ferry
