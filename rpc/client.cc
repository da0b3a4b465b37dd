#include "rpc/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/base/clock.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/embedded_backend.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

RpcClient::RpcClient(RpcClientOptions options)
    : options_(std::move(options)),
      security_(options_.security ? options_.security : Security::Insecure()),
      owned_timers_(options_.timers == nullptr
                        ? std::make_unique<ThreadTimers>()
                        : nullptr),
      timers_(options_.timers != nullptr ? options_.timers
                                         : owned_timers_.get()),
      channels_(std::make_unique<ChannelPool>(security_, options_.channels)) {
  membership_.AddListener([this](uint64_t node, const absl::Status& reason) {
    if (caller_ != nullptr) caller_->FailNode(node, reason);
  });
}

absl::StatusOr<std::unique_ptr<MembershipBackend>> RpcClient::MakeBackend() {
  if (options_.membership_backend) {
    return options_.membership_backend(timers_);
  }
  if (options_.master.empty()) {
    return absl::InvalidArgumentError("no master address given");
  }
  return std::make_unique<EmbeddedBackend>(EmbeddedBackendOptions{
      .master = channels_->ForMembership(options_.master),
      .master_address = options_.master,
      .timers = timers_,
      .membership = options_.membership});
}

absl::StatusOr<std::unique_ptr<RpcClient>> RpcClient::Connect(
    RpcClientOptions options) {
  auto client = std::unique_ptr<RpcClient>(new RpcClient(std::move(options)));
  FERRY_ASSIGN_OR_RETURN(client->backend_, client->MakeBackend());
  NodeSecrets& secrets = client->channels_->secrets();
  FERRY_ASSIGN_OR_RETURN(
      ClientRegistration registered,
      client->backend_->RegisterClient(client->options_.description,
                                       secrets.key().public_key(),
                                       client->options_.connect_timeout));
  client->directory_ = std::move(registered.directory);
  client->node_ = registered.node;
  // Every later call says which client sent it (with its issuer's voucher
  // until the worker heard of it).
  secrets.SetIdentity(registered.node, std::move(registered.vouchers));
  if (client->backend_->rank0_is_master() && !registered.read_only &&
      client->directory_.world_size() > 0) {
    secrets.SetMaster(client->directory_.at(0));
  }
  client->name_ = absl::StrCat("client", registered.node - kFirstClientNode);
  client->caller_ =
      std::make_unique<Caller>(client->channels_.get(), &client->membership_,
                               CallerIdentity{client->node_, client->name_});
  // A worker other than the master answered from its directory: there is
  // no membership to follow there.
  if (registered.read_only) return client;
  client->following_ = true;
  RpcClient* self = client.get();
  client->backend_->Follow(&client->membership_,
                           {.on_fenced = [](const absl::Status&) {},
                            .on_rejoined =
                                [self](const WorkerInfo& w, uint64_t) {
                                  self->directory_.Replace(w).IgnoreError();
                                }});
  return client;
}

RpcClient::~RpcClient() { Close(); }

void RpcClient::Close(bool leave) {
  if (closed_.exchange(true)) return;
  if (backend_ != nullptr) {
    if (leave && following_) backend_->Leave(absl::Seconds(2)).IgnoreError();
    backend_->Stop();
  }
  if (caller_ != nullptr) {
    caller_->CancelAll(absl::CancelledError(absl::StrCat(name_, " closed")));
    caller_->WaitIdle(absl::Seconds(2));
  }
  if (owned_timers_ != nullptr) owned_timers_->Stop();
}

absl::Duration RpcClient::ResolveTimeout(
    std::optional<absl::Duration> timeout) const {
  return CallTimeout(*timers_->clock(), {.timeout = timeout},
                     options_.default_timeout);
}

absl::Duration RpcClient::Resolve(const CallOptions& options) const {
  return CallTimeout(*timers_->clock(), options, options_.default_timeout);
}

Future<Value> RpcClient::RpcAsync(const std::string& to, const std::string& fn,
                                  std::vector<Value> args,
                                  CallOptions options) {
  if (closed_.load()) {
    return Future<Value>::Ready(
        absl::FailedPreconditionError("client is closed"));
  }
  absl::StatusOr<const WorkerInfo*> peer = directory_.Resolve(to);
  if (!peer.ok()) return Future<Value>::Ready(peer.status());
  return caller_->Call(**peer, fn, std::move(args), Resolve(options),
                       options.create_rref, options.cancellation,
                       options.trace);
}

absl::StatusOr<Value> RpcClient::RpcSync(const std::string& to,
                                         const std::string& fn,
                                         std::vector<Value> args,
                                         CallOptions options) {
  return AwaitCall(RpcAsync(to, fn, std::move(args), options),
                   ResolveTimeout(options.timeout));
}

absl::Status RpcClient::CallWorker(
    const std::string& worker, const char* what, absl::Duration timeout,
    absl::FunctionRef<grpc::Status(proto::Worker::Stub&, grpc::ClientContext*)>
        call) {
  absl::StatusOr<const WorkerInfo*> peer = directory_.Resolve(worker);
  if (!peer.ok()) return peer.status();
  if (auto down = membership_.DownReason(WorkerNode((*peer)->rank))) {
    return *down;
  }
  std::unique_ptr<proto::Worker::Stub> stub =
      proto::Worker::NewStub(channels_->ForWorker(**peer));
  grpc::ClientContext context;
  context.set_deadline(WallDeadlineIn(timeout));
  absl::Status s = FromGrpcStatus(call(*stub, &context));
  if (!s.ok()) return CallError(worker, what, s, timeout);
  return absl::OkStatus();
}

absl::StatusOr<proto::WorkerStatus> RpcClient::GetStatus(
    const std::string& worker, absl::Duration timeout) {
  proto::WorkerStatus status;
  FERRY_RETURN_IF_ERROR(
      CallWorker(worker, "status", timeout,
                 [&](proto::Worker::Stub& stub, grpc::ClientContext* context) {
                   return stub.GetStatus(context, {}, &status);
                 }));
  return status;
}

absl::StatusOr<std::vector<proto::FunctionInfo>> RpcClient::ListFunctions(
    const std::string& worker, absl::Duration timeout) {
  proto::ListFunctionsResponse response;
  FERRY_RETURN_IF_ERROR(
      CallWorker(worker, "functions", timeout,
                 [&](proto::Worker::Stub& stub, grpc::ClientContext* context) {
                   return stub.ListFunctions(context, {}, &response);
                 }));
  return std::vector<proto::FunctionInfo>(response.functions().begin(),
                                          response.functions().end());
}

absl::Status RpcClient::RequestShutdown(const std::string& worker,
                                        absl::Duration shutdown_timeout,
                                        absl::Duration timeout) {
  proto::ShutdownRequest request;
  request.set_timeout_ms(absl::ToInt64Milliseconds(shutdown_timeout));
  proto::ShutdownResponse response;
  return CallWorker(
      worker, "shutdown", timeout,
      [&](proto::Worker::Stub& stub, grpc::ClientContext* context) {
        return stub.Shutdown(context, request, &response);
      });
}

}  // namespace ferry
