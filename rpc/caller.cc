#include "rpc/caller.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/grpc_status.h"
#include "rpc/status_util.h"

namespace ferry {

struct Caller::Pending {
  grpc::ClientContext context;
  proto::CallRequest request;
  proto::CallResponse response;
  Promise<Value> promise;
  WorkerInfo to;
  absl::Duration timeout;
  RRefCodec* codec = nullptr;
  // Set (under Caller::mu_) when the call is failed on purpose.
  absl::Status failure;
};

Caller::Caller(ChannelPool* channels, Membership* membership,
               CallerIdentity self)
    : channels_(channels), membership_(membership), self_(std::move(self)) {}

Caller::~Caller() {
  CancelAll(absl::CancelledError("caller shut down"));
  WaitIdle(absl::Now() + absl::Seconds(5));
}

absl::Status CallError(const std::string& peer, const std::string& function,
                       const absl::Status& status, absl::Duration timeout) {
  if (absl::StartsWith(status.message(), absl::StrCat(peer, ": "))) {
    return status;
  }
  std::string detail(status.message());
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    detail = absl::StrCat("no reply within ",
                          absl::ToInt64Milliseconds(timeout), " ms");
  } else if (status.code() == absl::StatusCode::kUnavailable) {
    detail = absl::StrCat(peer, " unreachable: ", detail);
  }
  return absl::Status(status.code(),
                      absl::StrCat(peer, ": ", function, ": ", detail));
}

Future<Value> Caller::Call(const WorkerInfo& to, const std::string& function,
                           std::vector<Value> args, absl::Duration timeout,
                           RRefCodec* codec) {
  if (std::optional<absl::Status> down =
          membership_->DownReason(WorkerNode(to.rank))) {
    return Future<Value>::Ready(CallError(to.name, function, *down, timeout));
  }
  auto call = std::make_shared<Pending>();
  call->to = to;
  call->timeout = timeout;
  call->codec = codec;
  call->request.set_function(function);
  call->request.set_caller_node(self_.node);
  call->request.set_caller_name(self_.name);
  call->request.mutable_args()->Reserve(static_cast<int>(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    absl::Status s = ValueToProto(args[i], call->request.add_args(), codec);
    if (!s.ok()) {
      return Future<Value>::Ready(Annotate(
          s, absl::StrCat(to.name, ": ", function, ": args[", i, "]")));
    }
  }
  if (timeout != absl::InfiniteDuration()) {
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  Future<Value> result = call->promise.future();
  {
    absl::MutexLock lock(&mu_);
    inflight_.emplace(call.get(), call);
  }
  auto stub = proto::Worker::NewStub(channels_->ForWorker(to));
  stub->async()->Call(
      &call->context, &call->request, &call->response,
      [this, call](grpc::Status status) { Complete(call, status); });
  return result;
}

void Caller::Complete(const std::shared_ptr<Pending>& call,
                      const grpc::Status& grpc_status) {
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    failure = call->failure;
    inflight_.erase(call.get());
  }
  const std::string& fn = call->request.function();
  if (!failure.ok()) {
    call->promise.Set(CallError(call->to.name, fn, failure, call->timeout));
    return;
  }
  if (!grpc_status.ok()) {
    call->promise.Set(CallError(call->to.name, fn, FromGrpcStatus(grpc_status),
                                call->timeout));
    return;
  }
  absl::StatusOr<Value> result =
      ValueFromProto(call->response.mutable_result(), "result", call->codec);
  if (!result.ok()) {
    // The peer sent something malformed: not the caller's input at fault.
    call->promise.Set(absl::InternalError(
        absl::StrCat(call->to.name, ": ", fn,
                     ": malformed reply: ", result.status().message())));
    return;
  }
  call->promise.Set(*std::move(result));
}

void Caller::FailNode(uint64_t node, const absl::Status& reason) {
  std::vector<std::shared_ptr<Pending>> victims;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, call] : inflight_) {
      if (WorkerNode(call->to.rank) == node && call->failure.ok()) {
        call->failure = reason;
        victims.push_back(call);
      }
    }
  }
  // Cancelling outside the lock: the completion callback takes it.
  for (auto& call : victims) call->context.TryCancel();
}

void Caller::CancelAll(const absl::Status& reason) {
  std::vector<std::shared_ptr<Pending>> victims;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, call] : inflight_) {
      if (call->failure.ok()) call->failure = reason;
      victims.push_back(call);
    }
  }
  for (auto& call : victims) call->context.TryCancel();
}

int64_t Caller::inflight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(inflight_.size());
}

bool Caller::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return inflight_.empty();
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

}  // namespace ferry
