#include "tools/runtime/client.h"

#include <utility>

#include "collectives/client/client_collective.h"
#include "rpc/base/status_util.h"
#include "tools/runtime/job_dir.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {

ClientImpl& Impl(Client& client) { return *client.impl_; }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  RpcClientOptions rpc;
  rpc.master = std::move(options.master);
  rpc.description = std::move(options.description);
  rpc.connect_timeout = options.connect_timeout;
  rpc.default_timeout = options.default_timeout;
  SecurityOptions security = options.security;
  if (security.token_file.empty() && !security.insecure) {
    // A job this user's `ferryctl up` started here: its token.
    if (std::optional<std::string> dir = jobs::FindJob(rpc.master)) {
      security.token_file = *dir + "/token";
    }
  }
  FERRY_ASSIGN_OR_RETURN(rpc.security, Security::Load(security));
  ClientLayers layers;
  layers.rref.lease = options.rref_lease;
  layers.rref.max_live_rrefs = options.max_rrefs;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ClientImpl> impl,
                         ClientImpl::Connect(std::move(rpc), layers));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}

Client::~Client() { Close(); }

const std::string& Client::name() const { return impl_->rpc().name(); }

std::vector<std::string> Client::workers() const {
  return WorkerNames(impl_->rpc().directory());
}

Future<Value> Client::RpcAsync(const std::string& to, const std::string& fn,
                               std::vector<Value> args,
                               std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcAsync(to, fn, std::move(args), {.timeout = timeout});
}

absl::StatusOr<Value> Client::RpcSync(const std::string& to,
                                      const std::string& fn,
                                      std::vector<Value> args,
                                      std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcSync(to, fn, std::move(args), {.timeout = timeout});
}

absl::StatusOr<RRef> Client::Remote(const std::string& to,
                                    const std::string& fn,
                                    std::vector<Value> args,
                                    std::optional<absl::Duration> timeout) {
  return impl_->rrefs().Remote(to, fn, std::move(args), timeout);
}

Future<Value> Client::RpcAsync(const std::string& to, const std::string& fn,
                               std::vector<Value> args, Value::Map kwargs,
                               std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcAsync(
      to, fn, std::move(args),
      {.timeout = timeout, .kwargs = std::move(kwargs)});
}

absl::StatusOr<Value> Client::RpcSync(const std::string& to,
                                      const std::string& fn,
                                      std::vector<Value> args,
                                      Value::Map kwargs,
                                      std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcSync(
      to, fn, std::move(args),
      {.timeout = timeout, .kwargs = std::move(kwargs)});
}

absl::StatusOr<RRef> Client::Remote(const std::string& to,
                                    const std::string& fn,
                                    std::vector<Value> args, Value::Map kwargs,
                                    std::optional<absl::Duration> timeout) {
  return impl_->rrefs().Remote(to, fn, std::move(args), timeout,
                               std::move(kwargs));
}

absl::StatusOr<Value> Client::RunCollective(absl::string_view op,
                                            const Value& request) {
  return RunCollectiveFromClient(impl_->rpc(), op, request);
}

absl::StatusOr<WorkerStatus> Client::GetStatus(
    const std::string& worker, std::optional<absl::Duration> timeout) {
  FERRY_ASSIGN_OR_RETURN(
      proto::WorkerStatus status,
      impl_->rpc().GetStatus(worker, impl_->rpc().ResolveTimeout(timeout)));
  return WorkerStatusFromProto(status);
}

absl::StatusOr<std::vector<FunctionInfo>> Client::ListFunctions(
    const std::string& worker, std::optional<absl::Duration> timeout) {
  FERRY_ASSIGN_OR_RETURN(
      std::vector<proto::FunctionInfo> functions,
      impl_->rpc().ListFunctions(worker, impl_->rpc().ResolveTimeout(timeout)));
  std::vector<FunctionInfo> out;
  for (const proto::FunctionInfo& f : functions) {
    out.push_back({f.name(), f.signature(), f.doc()});
  }
  return out;
}

absl::Status Client::ShutdownJob(absl::Duration shutdown_timeout) {
  absl::Status first;
  for (const WorkerInfo& w : impl_->rpc().directory().workers()) {
    absl::Status s = impl_->rpc().RequestShutdown(
        w.name, shutdown_timeout, impl_->rpc().ResolveTimeout(std::nullopt));
    if (first.ok()) first = s;
  }
  return first;
}

void Client::Close() { impl_->Close(); }

}  // namespace ferry
