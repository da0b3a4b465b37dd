#include "rpc/membership/etcd/etcd_connection.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "rpc/membership/etcd/etcd_call.h"
#include "rpc/membership/etcd/etcd_status.h"
#include "rpc/wire/callback_queue.h"

namespace ferry {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd TLS ", what, " file '", path, "' is unreadable"));
  }
  if (content.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd TLS ", what, " file '", path, "' is missing or empty"));
  }
  return content.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const EtcdOptions& options) {
  if (options.tls_ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem(options.tls_ca_file, "CA");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert =
        ReadPem(options.tls_cert_file, "certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.tls_key_file, "key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  // A member that comes back is found again within a second (gRPC's own
  // reconnect backoff would grow to two minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Pings find a member that vanished without closing its connections
  // while streams are open. etcd refuses pings more often than every 5 s
  // (--grpc-keepalive-min-time) and pings without streams.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  return args;
}

std::unique_ptr<EtcdStubs> MakeStubs(
    const std::string& address,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  HoldGrpcCallbackQueue();  // Members' channels come and go (failover).
  auto stubs = std::make_unique<EtcdStubs>();
  stubs->address = address;
  stubs->channel =
      grpc::CreateCustomChannel(address, credentials, ChannelArgs());
  stubs->kv = etcdserverpb::KV::NewStub(stubs->channel);
  stubs->lease = etcdserverpb::Lease::NewStub(stubs->channel);
  stubs->watch = etcdserverpb::Watch::NewStub(stubs->channel);
  stubs->maintenance = etcdserverpb::Maintenance::NewStub(stubs->channel);
  stubs->auth = etcdserverpb::Auth::NewStub(stubs->channel);
  return stubs;
}

}  // namespace

// The contexts alive, so the channels can wait for them.
class ContextCount {
 public:
  void Add() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++live_;
  }
  void Done() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    --live_;
  }
  bool AwaitNone(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto none = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_ == 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
  }

 private:
  absl::Mutex mu_;
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::shared_ptr<EtcdConnection>> EtcdConnection::Create(
    const EtcdOptions& options) {
  absl::Status valid = ValidateEtcdOptions(options);
  if (!valid.ok()) return valid;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();
  EtcdOptions fixed = options;
  fixed.endpoints =  // Trimmed, one endpoint per entry.
      ParseEtcdEndpoints(absl::StrJoin(options.endpoints, ",")).value();
  if (fixed.clock == nullptr) fixed.clock = Clock::Real();
  std::vector<std::unique_ptr<EtcdStubs>> stubs;
  for (const std::string& address : fixed.endpoints) {
    stubs.push_back(MakeStubs(address, *credentials));
  }
  std::unique_ptr<Timers> own_timers;
  if (fixed.timers == nullptr) own_timers = std::make_unique<ThreadTimers>();
  return std::shared_ptr<EtcdConnection>(new EtcdConnection(
      std::move(fixed), std::move(own_timers), std::move(stubs)));
}

EtcdConnection::EtcdConnection(EtcdOptions options,
                               std::unique_ptr<Timers> own_timers,
                               std::vector<std::unique_ptr<EtcdStubs>> stubs)
    : options_(std::move(options)),
      own_timers_(std::move(own_timers)),
      timers_(own_timers_ != nullptr ? own_timers_.get() : options_.timers),
      addresses_(options_.endpoints),
      all_endpoints_(absl::StrJoin(options_.endpoints, ",")),
      contexts_(std::make_shared<ContextCount>()),
      stubs_(std::move(stubs)) {}

std::shared_ptr<grpc::ClientContext> EtcdConnection::NewContext() const {
  contexts_->Add();
  std::shared_ptr<ContextCount> count = contexts_;
  return std::shared_ptr<grpc::ClientContext>(
      new grpc::ClientContext(), [count](grpc::ClientContext* context) {
        delete context;
        count->Done();
      });
}

int EtcdConnection::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void EtcdConnection::SetCurrent(int i) {
  absl::MutexLock lock(&mu_);
  current_ = i;
}

void EtcdConnection::FailOver(int failed) {
  absl::MutexLock lock(&mu_);
  // Calls that failed together on one endpoint move on once, not once each.
  if (current_ == failed) current_ = (failed + 1) % size();
}

EtcdConnection::Token EtcdConnection::token() const {
  absl::MutexLock lock(&mu_);
  return token_;
}

Future<Done> EtcdConnection::RenewToken(uint64_t seen_generation,
                                        absl::Time deadline) {
  Promise<Done> done;
  {
    absl::MutexLock lock(&mu_);
    if (token_.generation > seen_generation) return Future<Done>::Ready(Done());
    if (renewing_.has_value()) return *renewing_;
    renewing_ = done.future();
  }
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  EtcdCallSpec spec{
      .what = absl::StrCat("Authenticate as user '", options_.user, "'"),
      .read_only = true,
      .authenticated = false};
  std::shared_ptr<EtcdConnection> self = shared_from_this();
  EtcdCall<etcdserverpb::AuthenticateRequest,
           etcdserverpb::AuthenticateResponse>(
      self, std::move(spec), std::move(request),
      [](const EtcdStubs& s, grpc::ClientContext* c,
         const etcdserverpb::AuthenticateRequest* q,
         etcdserverpb::AuthenticateResponse* a,
         std::function<void(grpc::Status)> cb) {
        s.auth->async()->Authenticate(c, q, a, std::move(cb));
      },
      deadline)
      .Then([self, done](
                const absl::StatusOr<etcdserverpb::AuthenticateResponse>& r) {
        if (r.ok()) {
          self->TokenRenewed(r->token(), done);
        } else if (IsAuthDisabled(r.status())) {
          self->TokenRenewed(std::string(), done);
        } else {
          self->TokenRenewed(r.status(), done);
        }
      });
  return done.future();
}

void EtcdConnection::TokenRenewed(const absl::StatusOr<std::string>& token,
                                  const Promise<Done>& done) {
  {
    absl::MutexLock lock(&mu_);
    renewing_.reset();
    if (token.ok()) {
      token_.value = *token;
      ++token_.generation;
    }
  }
  if (token.ok()) {
    done.Set(Done());
  } else {
    done.Set(token.status());
  }
}

void EtcdConnection::Prepare(grpc::ClientContext* context, absl::Time deadline,
                             const std::string& token, bool stream) const {
  if (deadline != absl::InfiniteFuture()) {
    // gRPC counts on the real clock: hand it the time left on ours.
    context->set_deadline(absl::ToChronoTime(absl::Now() + (deadline - Now())));
  }
  if (!token.empty()) context->AddMetadata("token", token);
  // etcd's "require leader" (clientv3.WithRequireLeader): a member that
  // loses its leader ends the stream instead of leaving it silent.
  if (stream) context->AddMetadata("hasleader", "true");
}

absl::Duration EtcdConnection::Backoff(int round) const {
  absl::Duration pause = options_.retry_backoff;
  for (int i = 0; i < round && pause < options_.max_retry_backoff; ++i) {
    pause *= 2;
  }
  return std::min(pause, options_.max_retry_backoff);
}

bool EtcdConnection::Track(std::shared_ptr<EtcdTask> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  const EtcdTask* key = task.get();
  tasks_.emplace(key, std::move(task));
  return true;
}

void EtcdConnection::Untrack(const EtcdTask* task) {
  std::shared_ptr<EtcdTask> released;  // Dropped after unlocking.
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task);
  if (it == tasks_.end()) return;
  released = std::move(it->second);
  tasks_.erase(it);
}

bool EtcdConnection::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool EtcdConnection::Stop(absl::Duration timeout) {
  std::vector<std::shared_ptr<EtcdTask>> tasks;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [key, task] : tasks_) tasks.push_back(task);
  }
  for (const auto& task : tasks) task->Cancel();
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return tasks_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void EtcdConnection::StopOwnTimers() {
  if (own_timers_ != nullptr) own_timers_->Stop();
}

// gRPC 1.51 runs callbacks on the threads of a completion queue that the
// last grpc::Channel to go shuts down and joins; a channel destroyed on one
// of those threads (its last reference dropped in a callback) joins itself,
// fails, and the queue is freed under the running thread (grpc/grpc#32584).
// Contexts hold their channel, and calls end in callbacks, so the channels
// go here, on the thread stopping the client, once no context is left.
void EtcdConnection::ReleaseChannels(absl::Duration timeout) {
  if (!contexts_->AwaitNone(timeout)) {
    for (auto& stubs : stubs_) stubs.release();  // Leaked on purpose.
  }
  stubs_.clear();
}

}  // namespace ferry
