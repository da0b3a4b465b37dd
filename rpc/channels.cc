#include "rpc/channels.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_interceptor.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/net_util.h"
#include "rpc/wire/callback_queue.h"

namespace ferry {

namespace {

// Attaches the node's secrets (the job token, its credential for the
// channel's destination) to every call on the channel, so no call site can
// forget them.
class SecretsInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit SecretsInterceptor(const DestinationCredential* credential)
      : credential_(credential) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      credential_->AddTo(methods->GetSendInitialMetadata());
    }
    methods->Proceed();
  }

 private:
  const DestinationCredential* credential_;
};

// Owned by the channel: so is the credential it caches.
class SecretsInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit SecretsInterceptorFactory(std::unique_ptr<DestinationCredential> c)
      : credential_(std::move(c)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new SecretsInterceptor(credential_.get());
  }

 private:
  const std::unique_ptr<DestinationCredential> credential_;
};

}  // namespace

void DestinationCredential::AddTo(
    std::multimap<std::string, std::string>* md) const {
  if (!secrets_->authorization().empty()) {
    md->emplace("authorization", secrets_->authorization());
  }
  std::string credential = Get();
  if (!credential.empty()) md->emplace(kCredentialHeader, credential);
}

void DestinationCredential::AddTo(grpc::ClientContext* context) const {
  if (!secrets_->authorization().empty()) {
    context->AddMetadata("authorization", secrets_->authorization());
  }
  std::string credential = Get();
  if (!credential.empty()) context->AddMetadata(kCredentialHeader, credential);
}

std::string DestinationCredential::Get() const {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (!cached_.empty()) return cached_;
  }
  std::optional<std::pair<uint64_t, std::string>> to = to_;
  if (!to.has_value()) {
    std::optional<WorkerInfo> master = secrets_->master();
    if (!master.has_value()) return "";
    to.emplace(WorkerNode(master->rank), master->public_key);
  }
  // Not under mu_: an ECDH, once (concurrent first calls may each make
  // it; they make the same).
  std::string credential = secrets_->CredentialFor(to->first, to->second);
  absl::MutexLock lock(&mu_);
  cached_ = credential;
  return credential;
}

NodeSecrets::NodeSecrets(const std::string& token,
                         std::shared_ptr<const NodeKey> key)
    : authorization_(token.empty() ? "" : absl::StrCat("Bearer ", token)),
      key_(key != nullptr ? std::move(key) : NodeKey::Generate()) {}

void NodeSecrets::SetIdentity(uint64_t node, std::vector<Voucher> vouchers) {
  absl::MutexLock lock(&mu_);
  node_ = node;
  vouchers_ = std::move(vouchers);
}

void NodeSecrets::SetMaster(const WorkerInfo& master) {
  absl::MutexLock lock(&mu_);
  master_ = master;
}

std::optional<WorkerInfo> NodeSecrets::master() const {
  absl::MutexLock lock(&mu_);
  return master_;
}

std::string NodeSecrets::CredentialFor(uint64_t to,
                                       const std::string& to_key) const {
  PresentedCredential c;
  {
    absl::MutexLock lock(&mu_);
    if (!node_.has_value()) return "";
    c.node = *node_;
    for (const Voucher& v : vouchers_) {
      // Only for the incarnation it was made for.
      if (WorkerNode(v.rank) == to && v.public_key == to_key) {
        c.public_key = key_->public_key();
        c.voucher = v.tag;
      }
    }
  }
  absl::StatusOr<std::string> secret = key_->Agree(to_key);
  if (!secret.ok()) return "";
  c.token = CallToken(*secret, {c.node, key_->public_key()}, {to, to_key});
  return FormatCredential(c);
}

ChannelPool::ChannelPool(std::shared_ptr<const Security> security,
                         ChannelOptions options,
                         std::shared_ptr<const NodeKey> key)
    : security_(std::move(security)),
      options_(options),
      host_(LocalHostName()),
      secrets_(security_->token(), std::move(key)) {
  // Channels come and go (clients reconnect, peers die); gRPC 1.51 aborts
  // if the callback queue is torn down while a new channel starts using it.
  HoldGrpcCallbackQueue();
}

std::shared_ptr<grpc::Channel> ChannelPool::ForMembership(
    const std::string& target) {
  absl::MutexLock lock(&mu_);
  auto it = membership_channels_.find(target);
  if (it == membership_channels_.end()) {
    it =
        membership_channels_.emplace(target, Create(target, true, std::nullopt))
            .first;
  }
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

bool ChannelPool::SharedMemoryTo(const WorkerInfo& worker) const {
  return options_.use_shared_memory && !worker.local_address.empty() &&
         TargetOf(worker) == worker.local_address;
}

std::string ChannelPool::ChannelKey(const std::string& target,
                                    const WorkerInfo& worker) {
  return absl::StrCat(target, "#", worker.public_key);
}

std::shared_ptr<grpc::Channel> ChannelPool::ForWorker(
    const WorkerInfo& worker) {
  const std::string& target = TargetOf(worker);
  // One channel per incarnation: its credential is made for that one.
  const std::string key = ChannelKey(target, worker);
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(key);
  if (it == channels_.end()) {
    it = channels_
             .emplace(key, Create(target, false,
                                  Destination{WorkerNode(worker.rank),
                                              worker.public_key}))
             .first;
  }
  // Aliasing with an empty owner: points at the channel, keeps nothing alive.
  return std::shared_ptr<grpc::Channel>(std::shared_ptr<void>(),
                                        it->second.get());
}

ChannelPool::Stamped ChannelPool::ForWorkerStamped(const WorkerInfo& worker) {
  const std::string& target = TargetOf(worker);
  const std::string key = ChannelKey(target, worker);
  absl::MutexLock lock(&mu_);
  auto it = stamped_channels_.find(key);
  if (it == stamped_channels_.end()) {
    StampedEntry e;
    // No interceptor: equal arguments, so gRPC gives it ForWorker's
    // connection.
    e.channel = grpc::CreateCustomChannel(
        target, security_->ChannelCredentials(), Arguments(false));
    // Secrets go only where they cannot be read on the way, as Create's.
    if (security_->MaySendSecrets(target)) {
      e.credential = std::make_unique<DestinationCredential>(
          &secrets_,
          std::make_pair(WorkerNode(worker.rank), worker.public_key));
    }
    it = stamped_channels_.emplace(key, std::move(e)).first;
  }
  return Stamped{std::shared_ptr<grpc::Channel>(std::shared_ptr<void>(),
                                                it->second.channel.get()),
                 it->second.credential.get()};
}

std::shared_ptr<grpc::Channel> ChannelPool::Create(
    const std::string& target, bool own_connection,
    std::optional<Destination> destination) const {
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  // Secrets go only where they cannot be read on the way; elsewhere
  // (plaintext to another host, --insecure) calls carry none.
  if (security_->MaySendSecrets(target)) {
    std::optional<std::pair<uint64_t, std::string>> to;
    if (destination.has_value()) {
      to.emplace(destination->node, destination->public_key);
    }
    interceptors.push_back(std::make_unique<SecretsInterceptorFactory>(
        std::make_unique<DestinationCredential>(&secrets_, std::move(to))));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, security_->ChannelCredentials(), Arguments(own_connection),
      std::move(interceptors));
}

grpc::ChannelArguments ChannelPool::Arguments(bool own_connection) const {
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
  return args;
}

}  // namespace ferry
