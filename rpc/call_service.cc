#include "rpc/call_service.h"

#include <unistd.h>

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/base/status_util.h"
#include "rpc/grpc_status.h"

namespace ferry {

namespace {

// A unary reactor that reports cancellation and deletes itself when done.
class CallReactor final : public grpc::ServerUnaryReactor {
 public:
  CallReactor() : cancelled_(std::make_shared<std::atomic<bool>>(false)) {}
  void OnCancel() override {
    cancelled_->store(true);
    if (on_cancel_) on_cancel_();
  }
  void OnDone() override { delete this; }
  const std::shared_ptr<std::atomic<bool>>& cancelled() const {
    return cancelled_;
  }
  // Set before the call starts running (OnCancel can only follow).
  void set_on_cancel(std::function<void()> f) { on_cancel_ = std::move(f); }

 private:
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::function<void()> on_cancel_;
};

}  // namespace

struct CallService::ActiveCall {
  CallReactor* reactor = nullptr;
  proto::CallResponse* response = nullptr;
  std::shared_ptr<const RegisteredFunction> function;
  CallContext context;
  std::vector<Value> args;
  LazyCodec codec;
  std::optional<proto::RRefHandle> remote;  // A remote() call's RRef.
  std::atomic<bool> claimed{false};
};

CallService::CallService(Options options) : options_(std::move(options)) {}

CallService::~CallService() {
  Abort(absl::UnavailableError(
      absl::StrCat(options_.worker_name, " is shutting down")));
}

absl::Status CallService::Prepare(grpc::CallbackServerContext* context,
                                  const proto::CallRequest* request,
                                  ActiveCall* call) {
  call->function = options_.registry->Find(request->function());
  if (call->function == nullptr) {
    return absl::NotFoundError("no such function (see `ferryctl functions`)");
  }
  call->context.worker = options_.worker_name;
  call->context.function = request->function();
  call->context.caller = request->caller_name();
  call->context.caller_node = request->caller_node();
  call->context.deadline = absl::FromChrono(context->deadline());
  call->context.cancelled = call->reactor->cancelled();
  call->codec = LazyCodec(options_.codecs, request->caller_node());
  // The request is ours until we finish; decoding moves tensor bytes out of
  // it instead of copying them.
  auto* args = const_cast<proto::CallRequest*>(request)->mutable_args();
  call->args.reserve(args->size());
  for (int i = 0; i < args->size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(
        Value v, ValueFromProto(args->Mutable(i), absl::StrCat("args[", i, "]"),
                                &call->codec));
    call->args.push_back(std::move(v));
  }
  if (request->has_create_rref()) {
    if (options_.remote == nullptr) {
      return absl::UnimplementedError("this worker keeps no RRefs");
    }
    FERRY_RETURN_IF_ERROR(
        options_.remote->Begin(request->create_rref(), request->caller_node()));
    call->remote = request->create_rref();
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* CallService::Call(
    grpc::CallbackServerContext* context, const proto::CallRequest* request,
    proto::CallResponse* response) {
  auto call = std::make_shared<ActiveCall>();
  call->reactor = new CallReactor();
  call->response = response;
  absl::Status prepared = Prepare(context, request, call.get());
  if (prepared.ok()) {
    absl::MutexLock lock(&mu_);
    if (accepting_) {
      active_.insert(call);
    } else {
      prepared = absl::UnavailableError(
          absl::StrCat(options_.worker_name, " is shutting down"));
    }
  }
  if (!prepared.ok()) {
    if (call->remote) options_.remote->Finish(*call->remote, prepared);
    call->claimed = true;
    call->reactor->Finish(
        ToGrpcStatus(Annotate(prepared, absl::StrCat(options_.worker_name, ": ",
                                                     request->function()))));
    return call->reactor;
  }
  if (call->remote) {
    RemoteHandler* remote = options_.remote;
    proto::RRefHandle rref = *call->remote;
    call->reactor->set_on_cancel([remote, rref] { remote->Abandon(rref); });
  }
  CallReactor* reactor = call->reactor;
  Run(std::move(call));
  return reactor;
}

void CallService::Run(std::shared_ptr<ActiveCall> call) {
  auto execute = [this, call]() {
    Future<Value> result =
        InvokeFunction(*call->function, call->context, std::move(call->args));
    result.Then(
        [this, call](const absl::StatusOr<Value>& r) { Answer(call, r); });
  };
  if (call->function->run_inline) {
    execute();
    return;
  }
  if (!options_.executor->Submit(execute)) {
    Answer(call, absl::UnavailableError(
                     absl::StrCat(options_.worker_name, " is shutting down")));
  }
}

bool CallService::Claim(const std::shared_ptr<ActiveCall>& call) {
  if (call->claimed.exchange(true)) return false;
  absl::MutexLock lock(&mu_);
  active_.erase(call);
  return true;
}

void CallService::Answer(const std::shared_ptr<ActiveCall>& call,
                         const absl::StatusOr<Value>& result) {
  served_.fetch_add(1);
  if (call->remote) {
    // The value stays here as the RRef's; the caller only learns the outcome.
    options_.remote->Finish(*call->remote, result);
    Reply(call, result.status());
    return;
  }
  absl::Status status = result.status();
  if (status.ok()) {
    status = Annotate(
        ValueToProto(*result, call->response->mutable_result(), &call->codec),
        "result");
  }
  if (!status.ok() || !call->codec.used()) {
    Reply(call, status);
    return;
  }
  // RRefs in the result go out only once their owners know the forks.
  call->codec.ReadyToSend().Then(
      [this, call](const absl::StatusOr<Done>& ready) {
        Reply(call, ready.status());
      });
}

void CallService::Reply(const std::shared_ptr<ActiveCall>& call,
                        const absl::Status& status) {
  if (!Claim(call)) {
    call->codec.Abandon();  // Aborted meanwhile.
    return;
  }
  if (!status.ok()) call->codec.Abandon();
  absl::Status named =
      status.ok() ? status
                  : Annotate(status, absl::StrCat(options_.worker_name, ": ",
                                                  call->context.function));
  call->reactor->Finish(ToGrpcStatus(named));
}

void CallService::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

void CallService::Abort(const absl::Status& status) {
  std::vector<std::shared_ptr<ActiveCall>> calls;
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    calls.assign(active_.begin(), active_.end());
  }
  for (auto& call : calls) {
    if (!Claim(call)) continue;
    call->reactor->Finish(
        ToGrpcStatus(Annotate(status, absl::StrCat(options_.worker_name, ": ",
                                                   call->context.function))));
  }
}

bool CallService::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return active_.empty();
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int64_t CallService::inflight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(active_.size());
}

grpc::ServerUnaryReactor* CallService::GetStatus(
    grpc::CallbackServerContext* context, const proto::StatusRequest*,
    proto::WorkerStatus* response) {
  auto* reactor = context->DefaultReactor();
  if (options_.fill_status) options_.fill_status(response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CallService::ListFunctions(
    grpc::CallbackServerContext* context, const proto::ListFunctionsRequest*,
    proto::ListFunctionsResponse* response) {
  auto* reactor = context->DefaultReactor();
  for (const auto& fn : options_.registry->List()) {
    proto::FunctionInfo* info = response->add_functions();
    info->set_name(fn->name);
    info->set_signature(fn->signature);
    info->set_doc(fn->doc);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CallService::Shutdown(
    grpc::CallbackServerContext* context, const proto::ShutdownRequest* request,
    proto::ShutdownResponse*) {
  auto* reactor = context->DefaultReactor();
  if (options_.on_shutdown_request) {
    options_.on_shutdown_request(absl::Milliseconds(request->timeout_ms()));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace ferry
