#include "rpc/caller.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/grpc_status.h"
#include "rpc/status_util.h"

namespace ferry {

struct Caller::Pending {
  std::shared_ptr<grpc::ClientContext> context =
      std::make_shared<grpc::ClientContext>();
  proto::CallRequest request;
  proto::CallResponse response;
  Promise<Value> promise;
  WorkerInfo to;
  absl::Duration timeout;
  std::unique_ptr<RRefCodec> codec;
  InflightCalls::Token token = 0;
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
  } else if (status.code() == absl::StatusCode::kUnavailable &&
             !absl::StrContains(detail, peer)) {
    detail = absl::StrCat(peer, " unreachable: ", detail);
  }
  return absl::Status(status.code(),
                      absl::StrCat(peer, ": ", function, ": ", detail));
}

Future<Value> Caller::Call(const WorkerInfo& to, const std::string& function,
                           std::vector<Value> args, absl::Duration timeout,
                           std::optional<proto::RRefHandle> create_rref) {
  if (auto down = membership_->DownReason(WorkerNode(to.rank))) {
    return Future<Value>::Ready(CallError(to.name, function, *down, timeout));
  }
  auto call = std::make_shared<Pending>();
  call->to = to;
  call->timeout = timeout;
  if (CodecFactory* codecs = codecs_.load()) {
    call->codec = codecs->ForPeer(WorkerNode(to.rank));
  }
  call->request.set_function(function);
  call->request.set_caller_node(self_.node);
  call->request.set_caller_name(self_.name);
  if (create_rref) *call->request.mutable_create_rref() = *create_rref;
  call->request.mutable_args()->Reserve(static_cast<int>(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    absl::Status s =
        ValueToProto(args[i], call->request.add_args(), call->codec.get());
    if (!s.ok()) {
      if (call->codec) call->codec->Abandon();
      return Future<Value>::Ready(Annotate(
          s, absl::StrCat(to.name, ": ", function, ": args[", i, "]")));
    }
  }
  if (timeout != absl::InfiniteDuration()) {
    call->context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  Future<Value> result = call->promise.future();
  call->token = inflight_.Add(WorkerNode(to.rank), call->context);
  if (call->codec == nullptr) {
    Send(call);
  } else {
    // RRefs in the arguments go out only once their owners know the forks.
    call->codec->ReadyToSend().Then(
        [this, call](const absl::StatusOr<Done>& ready) {
          if (ready.ok()) {
            Send(call);
          } else {
            Fail(call, ready.status());
          }
        });
  }
  return result;
}

void Caller::Send(const std::shared_ptr<Pending>& call) {
  StubFor(call->to)->async()->Call(
      call->context.get(), &call->request, &call->response,
      [this, call](grpc::Status status) { Complete(call, status); });
}

void Caller::Fail(const std::shared_ptr<Pending>& call,
                  const absl::Status& status) {
  absl::Status failure = inflight_.Remove(call->token);
  if (call->codec) call->codec->Abandon();
  call->codec.reset();
  call->promise.Set(CallError(call->to.name, call->request.function(),
                              failure.ok() ? status : failure, call->timeout));
  inflight_.Finished();
}

proto::Worker::Stub* Caller::StubFor(const WorkerInfo& to) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<proto::Worker::Stub>& stub = stubs_[to.rank];
  // A stub registers its methods on the channel: made once per peer.
  if (stub == nullptr) stub = proto::Worker::NewStub(channels_->ForWorker(to));
  return stub.get();
}

void Caller::Complete(const std::shared_ptr<Pending>& call,
                      const grpc::Status& grpc_status) {
  if (!grpc_status.ok()) {
    Fail(call, FromGrpcStatus(grpc_status));
    return;
  }
  absl::Status failure = inflight_.Remove(call->token);
  absl::StatusOr<Value> result = ValueFromProto(call->response.mutable_result(),
                                                "result", call->codec.get());
  if (!failure.ok()) {
    result = failure;
  } else if (!result.ok()) {
    // The peer sent something malformed: not the caller's input at fault.
    result = absl::InternalError(
        absl::StrCat("malformed reply: ", result.status().message()));
  }
  // Copies lent for the call are returned now, not whenever gRPC drops
  // the completion callback.
  call->codec.reset();
  if (!result.ok()) {
    call->promise.Set(CallError(call->to.name, call->request.function(),
                                result.status(), call->timeout));
  } else {
    call->promise.Set(*std::move(result));
  }
  inflight_.Finished();
}

}  // namespace ferry
