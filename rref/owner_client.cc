#include "rref/owner_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/tracing.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

// Control messages: ~2 minutes of retries before giving up on an owner the
// membership never declared dead (e.g. the master itself is gone).
constexpr int kMaxAttempts = 70;
constexpr absl::Duration kControlTimeout = absl::Seconds(5);

absl::Duration Backoff(int attempt) {
  return std::min(absl::Milliseconds(50) * (1 << std::min(attempt, 6)),
                  absl::Seconds(2));
}

bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kCancelled;
}

}  // namespace

OwnerClient::OwnerClient(ChannelPool* channels, Membership* membership,
                         Timers* timers, const Directory* directory)
    : channels_(channels),
      membership_(membership),
      timers_(timers),
      directory_(directory) {}

proto::RRefs::Stub* OwnerClient::StubFor(int owner) {
  const WorkerInfo& worker = directory_->at(owner);
  absl::MutexLock lock(&mu_);
  Stub& stub = stubs_[owner];
  // A replacement of the owner (a later generation) is at a new address;
  // the old stub stays (a call may still use it).
  if (stub.stub == nullptr || stub.generation != worker.generation) {
    if (stub.stub != nullptr) retired_.push_back(std::move(stub.stub));
    stub.generation = worker.generation;
    stub.stub = proto::RRefs::NewStub(channels_->ForWorker(worker));
  }
  return stub.stub.get();
}

bool OwnerClient::Known(int owner) const {
  return owner >= 0 && owner < directory_->world_size();
}

absl::Status OwnerClient::OwnerError(int owner, const std::string& what,
                                     const absl::Status& status) const {
  const std::string name =
      Known(owner) ? directory_->at(owner).name : absl::StrCat("rank ", owner);
  if (auto down = membership_->DownReason(WorkerNode(owner))) {
    return absl::UnavailableError(
        absl::StrCat("owner ", name, " died (", down->message(), ")"));
  }
  return absl::Status(status.code(),
                      absl::StrCat(name, ": ", what, ": ", status.message()));
}

template <typename Response, typename Start>
Future<Response> OwnerClient::Unary(int owner, const std::string& what,
                                    absl::Duration timeout, Start start) {
  if (!Known(owner)) {
    return Future<Response>::Ready(
        OwnerError(owner, what,
                   absl::InvalidArgumentError(absl::StrCat(
                       "no worker of rank ", owner, " (world size ",
                       directory_->world_size(), ")"))));
  }
  if (membership_->DownReason(WorkerNode(owner)).has_value()) {
    return Future<Response>::Ready(
        OwnerError(owner, what, absl::UnavailableError("")));
  }
  struct Call {
    std::shared_ptr<grpc::ClientContext> context =
        std::make_shared<grpc::ClientContext>();
    Promise<Response> promise;
    InflightCalls::Token token = 0;
  };
  auto call = std::make_shared<Call>();
  if (timeout != absl::InfiniteDuration()) {
    Clock& clock = *timers_->clock();
    call->context->set_deadline(WallDeadline(clock, clock.Now() + timeout));
  }
  // RRef messages (a fetch, a fork) continue the trace of the call that
  // sends them.
  AddTraceparent(call->context.get(), OutgoingTrace(TraceContext(), false));
  call->token = inflight_.Add(WorkerNode(owner), call->context);
  Future<Response> result = call->promise.future();
  // The callback holds no reference to this client (see ChannelPool); Stop()
  // waits for it instead.
  start(StubFor(owner), call->context.get(),
        [this, call, owner, what](const grpc::Status& s,
                                  absl::StatusOr<Response> r) {
          absl::Status failure = inflight_.Remove(call->token);
          absl::Status status = failure.ok() ? FromGrpcStatus(s) : failure;
          if (!status.ok()) {
            call->promise.Set(OwnerError(owner, what, status));
          } else {
            call->promise.Set(std::move(r));
          }
          inflight_.Finished();
        });
  return result;
}

Future<Done> OwnerClient::AddFork(int owner, proto::ForkRequest request,
                                  absl::Duration timeout) {
  auto req = std::make_shared<proto::ForkRequest>(std::move(request));
  return Unary<Done>(
      owner, "add fork", timeout,
      [req](proto::RRefs::Stub* stub, grpc::ClientContext* context, auto done) {
        auto resp = std::make_shared<proto::ForkResponse>();
        stub->async()->AddFork(
            context, req.get(), resp.get(),
            [req, resp, done](grpc::Status s) { done(s, Done()); });
      });
}

Future<Value> OwnerClient::Fetch(int owner, proto::ForkRequest request,
                                 absl::Duration timeout,
                                 std::shared_ptr<RRefCodec> codec) {
  auto req = std::make_shared<proto::ForkRequest>(std::move(request));
  return Unary<Value>(owner, "to_here", timeout,
                      [req, codec](proto::RRefs::Stub* stub,
                                   grpc::ClientContext* context, auto done) {
                        auto resp = std::make_shared<proto::FetchResponse>();
                        stub->async()->Fetch(
                            context, req.get(), resp.get(),
                            [req, resp, codec, done](grpc::Status s) {
                              if (!s.ok()) {
                                done(s, Value());
                                return;
                              }
                              done(s, ValueFromProto(resp->mutable_value(),
                                                     "value", codec.get()));
                            });
                      });
}

Future<LeaseAnswer> OwnerClient::RenewLease(int owner,
                                            proto::LeaseRequest request,
                                            absl::Duration timeout) {
  auto req = std::make_shared<proto::LeaseRequest>(std::move(request));
  return Unary<LeaseAnswer>(
      owner, "renew lease", timeout,
      [req](proto::RRefs::Stub* stub, grpc::ClientContext* context, auto done) {
        auto resp = std::make_shared<proto::LeaseResponse>();
        stub->async()->RenewLease(
            context, req.get(), resp.get(), [req, resp, done](grpc::Status s) {
              done(s, LeaseAnswer{absl::Milliseconds(resp->lease_ms()),
                                  resp->epoch()});
            });
      });
}

Future<std::vector<proto::OwnedRRef>> OwnerClient::ListOwned(
    int owner, absl::Duration timeout) {
  using Rows = std::vector<proto::OwnedRRef>;
  return Unary<Rows>(
      owner, "list rrefs", timeout,
      [](proto::RRefs::Stub* stub, grpc::ClientContext* context, auto done) {
        auto req = std::make_shared<proto::ListOwnedRequest>();
        auto resp = std::make_shared<proto::ListOwnedResponse>();
        stub->async()->ListOwned(
            context, req.get(), resp.get(), [req, resp, done](grpc::Status s) {
              done(s, Rows(resp->rrefs().begin(), resp->rrefs().end()));
            });
      });
}

void OwnerClient::Control(int owner, bool is_delete, proto::ForkRequest request,
                          int attempt) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    if (attempt == 0) ++pending_;
  }
  auto req = std::make_shared<proto::ForkRequest>(std::move(request));
  auto send = [req, is_delete](proto::RRefs::Stub* stub,
                               grpc::ClientContext* context, auto done) {
    auto resp = std::make_shared<proto::ForkResponse>();
    auto cb = [req, resp, done](grpc::Status s) { done(s, Done()); };
    if (is_delete) {
      stub->async()->DeleteFork(context, req.get(), resp.get(), cb);
    } else {
      stub->async()->ConfirmFork(context, req.get(), resp.get(), cb);
    }
  };
  std::weak_ptr<OwnerClient> weak = shared_from_this();
  Unary<Done>(owner, is_delete ? "delete fork" : "confirm fork",
              kControlTimeout, send)
      .Then([weak, owner, is_delete, req,
             attempt](const absl::StatusOr<Done>& r) {
        auto self = weak.lock();
        if (!self) return;
        bool gone =
            self->membership_->DownReason(WorkerNode(owner)).has_value();
        if (!r.ok() && Retryable(r.status()) && !gone &&
            attempt + 1 < kMaxAttempts) {
          self->timers_->RunAfter(
              Backoff(attempt), [weak, owner, is_delete, req, attempt] {
                if (auto s = weak.lock())
                  s->Control(owner, is_delete, *req, attempt + 1);
              });
          return;
        }
        absl::MutexLock lock(&self->mu_);
        if (!self->stopped_) --self->pending_;
      });
}

int64_t OwnerClient::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_;
}

bool OwnerClient::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle),
                              TimeLeft(*timers_->clock(), deadline));
}

void OwnerClient::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    pending_ = 0;  // Undelivered messages are dropped with the node.
  }
  inflight_.CancelAll(absl::CancelledError("stopping"));
  // Waits for gRPC's callbacks of the cancelled calls (they come promptly):
  // a bound on a real event, not a protocol time.
  inflight_.WaitIdle(absl::Seconds(5));
}

}  // namespace ferry
