// RpcAgent (rpc/agent.h): what runs before the job forms. The services
// and extensions layers plug in, the gRPC server with its limits and
// services (StartServer), Listen, and Start, which joins (agent_membership.cc)
// and opens the call service.

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "rpc/agent.h"
#include "rpc/auth/net_util.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

// What one connection may cost the server (rpc/base/limits.h).
void ApplyServerLimits(const Limits& limits, grpc::ServerBuilder* builder) {
  const int max_message =
      static_cast<int>(std::min<int64_t>(limits.max_message_bytes, INT32_MAX));
  builder->SetMaxReceiveMessageSize(max_message);
  builder->SetMaxSendMessageSize(max_message);
  // Memory for gRPC's buffers, incoming messages included: past it new
  // requests wait or are refused instead of the process growing.
  grpc::ResourceQuota quota("ferry");
  quota.Resize(static_cast<size_t>(limits.grpc_memory_bytes));
  builder->SetResourceQuota(quota);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              static_cast<int>(std::min<int64_t>(
                                  limits.max_concurrent_streams, INT32_MAX)));
  // Peers ping idle connections to detect death (every 10 s, see
  // rpc/channels.cc): let them, but no more often than every 5 s; a peer
  // that floods pings is cut off after gRPC's default two strikes.
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  // And the server pings its callers: a connection whose peer vanished
  // (no RST from a crashed host) is closed, and every call on it ends,
  // giving back what it held (replies not sent, streams, their slots).
  // Every 20 s, closed after 40 s without an ack (the channels' timeout,
  // rpc/channels.cc: a late ack on a loaded host is no death). A peer that
  // answers pings but stops reading is cut off per call instead
  // (--reply_ttl_ms, call_service.h).
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 40000);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

// gRPC's standard health service on every server; reflection (which
// gRPC can only turn on for every server the process builds) when asked.
void EnableStandardServices(bool reflection) {
  static const bool health = [] {
    grpc::EnableDefaultHealthCheckService(true);
    return true;
  }();
  (void)health;
  if (reflection) {
    static const bool once = [] {
      grpc::reflection::InitProtoReflectionServerBuilderPlugin();
      return true;
    }();
    (void)once;
  }
}

// Leaves gRPC's reflection plugin out of one server. (Linking gRPC's
// reflection library registers the plugin for every server at static
// initialization, so without this a worker would answer reflection
// whether or not --reflection was given.)
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    std::erase_if(*plugins, [](const auto& p) {
      return p->name() == "proto_server_reflection";
    });
  }
};

}  // namespace

void RpcAgent::AddService(BoundedServiceBase* service) {
  services_.push_back(service);
}
void RpcAgent::SetGenericService(grpc::CallbackGenericService* service) {
  generic_service_ = service;
}
void RpcAgent::AddExtension(AgentExtension* e) { extensions_.push_back(e); }
void RpcAgent::SetCodecs(CodecFactory* codecs) { codecs_ = codecs; }
void RpcAgent::SetRemoteHandler(RemoteHandler* remote) { remote_ = remote; }

absl::StatusOr<std::string> RpcAgent::Listen() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kNew) {
      return absl::FailedPreconditionError(
          absl::StrCat(options_.name, ": already started"));
    }
    state_ = State::kListening;
  }
  absl::Status s = StartServer();
  if (!s.ok()) {
    Stop();
    return Annotate(s, options_.name);
  }
  ReportEvent("listening", address_);
  return address_;
}

absl::Status RpcAgent::Start() {
  bool listening;
  {
    absl::MutexLock lock(&mu_);
    listening = state_ == State::kListening;
    if (state_ != State::kNew && !listening) {
      return absl::FailedPreconditionError(
          absl::StrCat(options_.name, ": Start() may be called once"));
    }
  }
  if (!listening) {
    absl::StatusOr<std::string> address = Listen();
    if (!address.ok()) return address.status();
  }
  absl::Status s = JoinAndWatch();
  if (!s.ok()) {
    Stop();
    return Annotate(s, options_.name);
  }
  std::optional<absl::Duration> deferred;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kListening) {
      return absl::CancelledError(
          absl::StrCat(options_.name, " was stopped while starting"));
    }
    state_ = State::kRunning;
    deferred = std::exchange(deferred_shutdown_, std::nullopt);
  }
  call_service_->Open();
  // The user's hook runs outside mu_: it may call back (e.g. stopped()).
  ReportEvent("joined", absl::StrCat("world_size=", options_.world_size,
                                     " master=", master_address_));
  if (deferred.has_value()) {
    const absl::Duration timeout = *deferred;
    RunInBackground([this, timeout] { Shutdown(timeout).IgnoreError(); });
  }
  return absl::OkStatus();
}

absl::Status RpcAgent::StartServer() {
  if (options_.world_size < 1 || options_.rank < 0 ||
      options_.rank >= options_.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options_.rank, " is out of range for world_size ",
                     options_.world_size));
  }
  caller_->SetCodecs(codecs_);
  std::string listen = options_.listen;
  std::string master_host = "127.0.0.1";
  if (!options_.master.empty()) {
    FERRY_ASSIGN_OR_RETURN(HostPort master, ParseHostPort(options_.master));
    master_host = master.host;
    if (options_.rank == 0) {
      listen = JoinHostPort(
          IsLoopbackHost(master.host) ? master.host : "0.0.0.0", master.port);
    }
  } else if (options_.rank != 0 && embedded()) {
    return absl::InvalidArgumentError("no master address (set --master)");
  }
  if (listen.empty()) {
    listen =
        JoinHostPort(IsLoopbackHost(master_host) ? master_host : "0.0.0.0", 0);
  }
  FERRY_ASSIGN_OR_RETURN(HostPort bind, ParseHostPort(listen));
  FERRY_RETURN_IF_ERROR(security_->CheckServe(bind.host));
  FERRY_RETURN_IF_ERROR(StartTelemetry());

  EnableStandardServices(options_.reflection);
  call_service_ = std::make_unique<CallService>(CallService::Options{
      .worker_name = options_.name,
      .limits = options_.limits,
      .registry = &registry_,
      .executor = executor_.get(),
      .codecs = codecs_,
      .remote = remote_,
      .fill_status = [this](proto::WorkerStatus* s) { *s = Status(); },
      .on_shutdown_request = [this](absl::Duration t) { RequestShutdown(t); },
      .clock = timers_->clock(),
      .authenticator = authenticator_.get(),
      // Calls need the directory: served once the job formed (Start).
      .start_closed = true,
      .prejoin_calls = prejoin_calls_,
      .timers = timers_,
      .metrics = metrics(),
      .tracer = tracer_.get(),
      .tracing = options_.telemetry.tracing,
      .node_label = [this](uint64_t node) { return NodeLabel(node); },
  });
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(
      listen, security_->ServerCredentials(listen, authenticator_), &port);
  std::string local;
  if (options_.local_socket && !security_->tls()) {
    absl::BitGen gen;
    local = absl::StrFormat("unix-abstract:ferry-%d-%s-%016x", getpid(),
                            options_.name, absl::Uniform<uint64_t>(gen));
    builder.AddListeningPort(
        local, security_->ServerCredentials(local, authenticator_));
  }
  ApplyServerLimits(options_.limits, &builder);
  if (!options_.reflection) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  // Every service parses every request within the limits
  // (rpc/wire/bounded_service.h): one that does not is a programming error.
  std::vector<BoundedServiceBase*> services = services_;
  services.push_back(call_service_.get());
  call_stream_service_ = std::make_unique<CallStreamService>(
      call_service_.get(),
      CallStreamService::Options{
          .timers = timers_,
          .open_streams = open_streams_,
          .shared_memory = options_.channels.use_shared_memory});
  services.push_back(call_stream_service_.get());
  if (options_.rank == 0 && embedded()) {
    rendezvous_ = std::make_unique<RendezvousService>(
        RendezvousOptions{
            .world_size = options_.world_size,
            .heartbeat_timeout = options_.heartbeat_timeout,
            .limits = options_.limits,
            .require_identity = authenticator_->require_identity(),
            .cert_identity = security_->cert_identity(),
            .key = key_},
        timers_);
    services.push_back(rendezvous_.get());
  } else {
    // Any worker but the embedded master answers clients from its
    // directory (on etcd, rank 0 too: no rank is special there).
    directory_service_ = std::make_unique<DirectoryService>(options_.rank, key_,
                                                            options_.limits);
    services.push_back(directory_service_.get());
  }
  for (BoundedServiceBase* service : services) {
    if (std::vector<std::string> loose = service->UnboundedMethods();
        !loose.empty()) {
      return absl::InternalError(
          absl::StrCat(options_.name, ": ", absl::StrJoin(loose, ", "),
                       " would parse requests without bounds"));
    }
    builder.RegisterService(service->grpc_service());
  }
  if (generic_service_ != nullptr) {
    builder.RegisterCallbackGenericService(generic_service_);
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  std::string host = bind.host;
  if (IsWildcardHost(host)) {
    host = options_.rank == 0 && !options_.master.empty()
               ? master_host
               : LocalAddressFacing(master_host);
  }
  address_ = JoinHostPort(host, port);
  // Rank 0 is the master: dial what it actually listens on (its port may
  // have been picked).
  master_address_ =
      options_.rank == 0 && embedded() ? address_ : options_.master;
  self_local_address_ = local;
  return absl::OkStatus();
}

}  // namespace ferry
