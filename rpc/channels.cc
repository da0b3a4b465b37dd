#include "rpc/channels.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_interceptor.h"
#include "rpc/authenticator.h"
#include "rpc/callback_queue.h"
#include "rpc/net_util.h"

namespace ferry {

namespace {

// Attaches the node's secrets (the job token, its credential) to every call
// on the channel, so no call site can forget them.
class SecretsInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit SecretsInterceptor(const NodeSecrets* secrets) : secrets_(secrets) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      secrets_->AddTo(methods->GetSendInitialMetadata());
    }
    methods->Proceed();
  }

 private:
  const NodeSecrets* secrets_;
};

class SecretsInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit SecretsInterceptorFactory(const NodeSecrets* secrets)
      : secrets_(secrets) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new SecretsInterceptor(secrets_);
  }

 private:
  const NodeSecrets* secrets_;
};

}  // namespace

NodeSecrets::NodeSecrets(const std::string& token)
    : authorization_(token.empty() ? "" : absl::StrCat("Bearer ", token)) {}

void NodeSecrets::SetCredential(std::string credential) {
  absl::MutexLock lock(&mu_);
  credential_ = std::move(credential);
}

void NodeSecrets::AddTo(std::multimap<std::string, std::string>* md) const {
  if (!authorization_.empty()) md->emplace("authorization", authorization_);
  absl::ReaderMutexLock lock(&mu_);
  if (!credential_.empty()) md->emplace(kCredentialHeader, credential_);
}

void NodeSecrets::AddTo(grpc::ClientContext* context) const {
  if (!authorization_.empty()) {
    context->AddMetadata("authorization", authorization_);
  }
  absl::ReaderMutexLock lock(&mu_);
  if (!credential_.empty())
    context->AddMetadata(kCredentialHeader, credential_);
}

ChannelPool::ChannelPool(std::shared_ptr<const Security> security,
                         ChannelOptions options)
    : security_(std::move(security)),
      options_(options),
      host_(LocalHostName()),
      secrets_(security_->token()) {
  // Channels come and go (clients reconnect, peers die); gRPC 1.51 aborts
  // if the callback queue is torn down while a new channel starts using it.
  HoldGrpcCallbackQueue();
}

std::shared_ptr<grpc::Channel> ChannelPool::Get(const std::string& target) {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(target);
  if (it == channels_.end())
    it = channels_.emplace(target, Create(target, false)).first;
  // Aliasing with an empty owner: points at the channel, keeps nothing alive.
  return std::shared_ptr<grpc::Channel>(std::shared_ptr<void>(),
                                        it->second.get());
}

std::shared_ptr<grpc::Channel> ChannelPool::ForMembership(
    const std::string& target) {
  absl::MutexLock lock(&mu_);
  auto it = membership_channels_.find(target);
  if (it == membership_channels_.end())
    it = membership_channels_.emplace(target, Create(target, true)).first;
  return std::shared_ptr<grpc::Channel>(std::shared_ptr<void>(),
                                        it->second.get());
}

const std::string& ChannelPool::TargetOf(const WorkerInfo& worker) const {
  // Not with TLS: certificates name network hosts, not socket names.
  if (options_.use_local_sockets && !security_->tls() &&
      !worker.local_address.empty() && worker.host == host_) {
    return worker.local_address;
  }
  return worker.address;
}

std::shared_ptr<grpc::Channel> ChannelPool::ForWorker(
    const WorkerInfo& worker) {
  return Get(TargetOf(worker));
}

std::shared_ptr<grpc::Channel> ChannelPool::ForWorkerStamped(
    const WorkerInfo& worker, bool* secrets) {
  const std::string& target = TargetOf(worker);
  *secrets = security_->MaySendSecrets(target);
  absl::MutexLock lock(&mu_);
  auto it = stamped_channels_.find(target);
  if (it == stamped_channels_.end()) {
    it = stamped_channels_.emplace(target, Create(target, false, false)).first;
  }
  return std::shared_ptr<grpc::Channel>(std::shared_ptr<void>(),
                                        it->second.get());
}

std::shared_ptr<grpc::Channel> ChannelPool::Create(const std::string& target,
                                                   bool own_connection,
                                                   bool intercept) const {
  grpc::ChannelArguments args;
  // gRPC shares one connection among channels with equal arguments (its
  // global subchannel pool); a local pool gives this channel its own.
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  args.SetMaxSendMessageSize(options_.max_message_bytes);
  // Detect dead peers on idle connections too (a crashed host sends no RST).
  // An unanswered ping closes the connection and fails every call on it, so
  // it waits 40 s, longer than the default heartbeat timeout (30 s): a late
  // ack is a suspicion, as a late poll is (membership declares deaths). With 5
  // s, 128 workers on 2 cores lost connections mid all_reduce ("keepalive
  // watchdog timeout") while every process was alive.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 40000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly after a peer restarts; failures surface as errors.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  security_->ConfigureChannel(&args);
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  // Secrets go only where they cannot be read on the way; elsewhere
  // (plaintext to another host, --insecure) calls carry none.
  if (intercept && security_->MaySendSecrets(target)) {
    interceptors.push_back(
        std::make_unique<SecretsInterceptorFactory>(&secrets_));
  }
  if (interceptors.empty()) {
    return grpc::CreateCustomChannel(target, security_->ChannelCredentials(),
                                     args);
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, security_->ChannelCredentials(), args, std::move(interceptors));
}

}  // namespace ferry
