#include "rpc/agent.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "rpc/auth/net_util.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/clock.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/base/timed_wait.h"
#include "rpc/base/traceparent.h"
#include "rpc/builtins.h"
#include "rpc/membership/embedded_backend.h"
#include "rpc/stacks.h"
#include "rpc/stacks_service.h"

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer replaces malloc, so mallinfo2 sees nothing; its own
// count is the same figure (declared here: GCC 12 does not ship
// sanitizer/allocator_interface.h).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#else
// gperftools' tcmalloc, when the binary links it (ferryd, ferryctl,
// ferry_bench; never libferry): it replaces malloc, so mallinfo2 sees
// nothing, and keeps the same figure itself. Weak: null without it.
extern "C" int MallocExtension_GetNumericProperty(const char* property,
                                                  size_t* value)
    __attribute__((weak));
#endif

namespace ferry {

namespace {

// Bytes allocated from the C heap and not freed (WorkerStatus.heap_bytes).
int64_t HeapBytesInUse() {
#if defined(__SANITIZE_ADDRESS__)
  return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
  size_t allocated = 0;
  if (MallocExtension_GetNumericProperty != nullptr &&
      MallocExtension_GetNumericProperty("generic.current_allocated_bytes",
                                         &allocated) != 0) {
    return static_cast<int64_t>(allocated);
  }
  const struct mallinfo2 heap = mallinfo2();
  return static_cast<int64_t>(heap.uordblks + heap.hblkhd);
#endif
}

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

uint64_t RandomIncarnation() {
  return RandomU64() | 1;  // Never 0.
}

// How often a worker logs clients leaving (rpc/churn_log.h).
constexpr absl::Duration kChurnLogInterval = absl::Seconds(10);

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

RpcAgent::RpcAgent(AgentOptions options)
    : options_(std::move(options)),
      security_(options_.security ? options_.security : Security::Insecure()),
      incarnation_(RandomIncarnation()),
      key_(NodeKey::Generate()),
      started_(Clock::Real()->Now()),
      owned_timers_(options_.timers == nullptr
                        ? std::unique_ptr<Timers>(new ThreadTimers())
                        : nullptr),
      timers_(options_.timers != nullptr ? options_.timers
                                         : owned_timers_.get()),
      executor_(std::make_unique<Executor>(options_.executor_threads,
                                           options_.limits.max_queued_tasks)),
      channels_(
          std::make_unique<ChannelPool>(security_, options_.channels, key_)),
      open_streams_(OpenStreamsBudget(options_.limits)),
      prejoin_calls_(
          std::make_shared<Quota>(options_.limits.max_prejoin_calls)),
      authenticator_(std::make_shared<Authenticator>(AuthenticatorOptions{
          .token = security_->token(),
          // Where secrets travel, every node sends its credential.
          .require_identity = !security_->token().empty() ||
                              (security_->tls() && !security_->insecure()),
          // On etcd, newcomers' keys arrive by the watch.
          .late_admits = !embedded(),
          .cert_identity = security_->cert_identity(),
          .processes_metadata = !security_->insecure(),
          .prejoin_calls = prejoin_calls_,
          .prejoin_wait = absl::Milliseconds(options_.limits.prejoin_wait_ms),
          .name = options_.name.empty() ? absl::StrCat("worker", options_.rank)
                                        : options_.name,
          .master_announces_clients = embedded(),
          .self = WorkerNode(options_.rank),
          .key = key_,
      })),
      metrics_(std::make_shared<Metrics>(
          Metrics::Options{.worker = options_.name.empty()
                                         ? absl::StrCat("worker", options_.rank)
                                         : options_.name,
                           .world_size = options_.world_size})) {
  if (options_.name.empty())
    options_.name = absl::StrCat("worker", options_.rank);
  caller_ = std::make_unique<Caller>(
      channels_.get(), &membership_,
      CallerIdentity{WorkerNode(options_.rank), options_.name},
      options_.limits);
  caller_->SetTelemetry({.metrics = metrics(),
                         .tracing = options_.telemetry.tracing,
                         .sample_new = !options_.telemetry.trace_file.empty()});
  absl::Status s = RegisterBuiltins(&registry_, timers_);
  (void)s;  // Built-in names are valid and unique.
  churn_ = std::make_unique<ChurnLog>(
      timers_, kChurnLogInterval,
      [this](absl::string_view line) { ReportEvent("peer_down", line); });
  events_ = std::make_unique<MembershipEvents>(timers_);
  RegisterTelemetryBuiltins();
  RegisterEventsBuiltin();
  membership_.AddListener([this](uint64_t node, const absl::Status& reason) {
    OnNodeDown(node, reason);
  });
}

RpcAgent::~RpcAgent() {
  Stop();
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    t = std::move(shutdown_thread_);
  }
  if (t.joinable()) t.join();
}

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

absl::StatusOr<std::unique_ptr<MembershipBackend>> RpcAgent::MakeBackend() {
  if (!embedded()) return options_.membership_backend(timers_);
  MembershipOptions membership = options_.membership;
  // The master does not watch itself; the others give it as long as it
  // gives them.
  membership.master_timeout = options_.rank == 0 ? absl::InfiniteDuration()
                                                 : options_.heartbeat_timeout;
  return std::make_unique<EmbeddedBackend>(EmbeddedBackendOptions{
      .master = channels_->ForMembership(master_address_),
      .master_address = master_address_,
      .timers = timers_,
      .membership = membership});
}

absl::Status RpcAgent::JoinAndWatch() {
  FERRY_ASSIGN_OR_RETURN(backend_, MakeBackend());
  JoinSpec spec{
      .self = {options_.name, options_.rank, address_, self_local_address_,
               LocalHostName(), getpid(), key_->public_key()},
      .world_size = options_.world_size,
      .incarnation = incarnation_};
  FERRY_ASSIGN_OR_RETURN(directory_,
                         backend_->Join(spec, options_.startup_timeout));
  // From now on this worker's calls say who sent them, and it knows every
  // worker's key (the directory's); clients' come with membership.
  channels_->secrets().SetIdentity(WorkerNode(options_.rank));
  if (backend_->rank0_is_master()) {
    channels_->secrets().SetMaster(directory_.at(0));
  }
  for (const WorkerInfo& w : directory_.workers()) {
    if (!w.public_key.empty()) {
      authenticator_->Admit(WorkerNode(w.rank), w.public_key);
    }
  }
  authenticator_->SetLearned();
  if (directory_service_ != nullptr)
    directory_service_->SetDirectory(directory_);
  // Registered last, so the layers above (collectives, RRefs) have failed
  // their work naming worker0 before this listener starts the stop.
  if (backend_->rank0_is_master()) {
    membership_.AddListener([this](uint64_t node, const absl::Status& reason) {
      if (node == WorkerNode(0) && options_.rank != 0) OnMasterLost(reason);
    });
  }
  backend_->Follow(
      &membership_,
      {.on_fenced = [this](const absl::Status& s) { OnFenced(s); },
       .on_rejoined = [this](
                          const WorkerInfo& w,
                          uint64_t incarnation) { OnRejoined(w, incarnation); },
       .on_client =
           [this](uint64_t node, const std::string& key) {
             authenticator_->Admit(node, key);
           },
       .on_clients_end =
           [this](uint64_t end) { authenticator_->SetClientsEnd(end); }});
  StartHeartbeatProbe();
  return absl::OkStatus();
}

void RpcAgent::RegisterTelemetryBuiltins() {
  metrics_->SetSources([this] { return Status(); },
                       [this](int rank) {
                         return rank < directory_.world_size()
                                    ? directory_.at(rank).name
                                    : absl::StrCat("worker", rank);
                       });
  absl::Status s = registry_.Register(
      "ferry.metrics", [this]() { return metrics_->Text(); },
      {.doc = "this worker's metrics in Prometheus' text format (what "
              "--metrics_listen serves at /metrics)"});
  (void)s;  // Fixed, valid, unique names.
  s = registry_.Register(
      "ferry.trace",
      [this](const std::string& trace_id) -> absl::StatusOr<Value> {
        auto id = ParseTraceId(trace_id);
        if (!id) {
          return absl::InvalidArgumentError(
              "trace_id: expected 32 lower-case hex digits");
        }
        Value::List spans;
        if (tracer_ != nullptr) {
          for (const Span& span : tracer_->SpansOf(id->first, id->second))
            spans.push_back(SpanToValue(span));
        }
        return Value(std::move(spans));
      },
      {.params = {"trace_id"},
       .doc = "the spans of a sampled trace this worker recorded "
              "(ferryctl call --trace)"});
  (void)s;
  // A capture interrupts every thread: off the executor, one at a time, at
  // most once a second (rpc/stacks_service.h), for clients only.
  stacks_ = std::make_unique<StacksService>(
      StacksService::Options{.capture = [this] { return StacksValue(); }});
  s = registry_.Register(
      "ferry.stacks",
      [this](const CallContext& ctx) -> Future<Value> {
        absl::Status allowed =
            authenticator_->CheckClient(ctx.caller_node, "ferry.stacks");
        if (!allowed.ok()) return Future<Value>::Ready(allowed);
        return stacks_->Get();
      },
      {.doc = "every thread's stack, what each waits for, the calls "
              "executing and the collectives waiting here (ferryctl stacks; "
              "clients only, a capture at most once a second)",
       .run_inline = true});
  (void)s;
}

Value RpcAgent::StacksValue() const {
  Value::List threads, calls, collectives;
  for (const ThreadStack& t : CaptureStacks()) {
    Value::Map m{
        {"tid", t.tid},
        {"name", t.name},
        {"captured", t.captured},
        {"frames", Value(Value::List(t.frames.begin(), t.frames.end()))}};
    if (!t.waiting.empty()) m.emplace("waiting", t.waiting);
    threads.push_back(Value(std::move(m)));
  }
  if (call_service_ != nullptr) {
    for (const CallService::Executing& c : call_service_->executing()) {
      calls.push_back(Value(
          Value::Map{{"function", c.function},
                     {"caller", c.caller},
                     {"running_ms", absl::ToInt64Milliseconds(c.running)}}));
    }
  }
  const proto::WorkerStatus status = Status();  // Outlives the loop.
  for (const proto::GroupProgress& g : status.groups()) {
    if (g.waiting().op().empty()) continue;
    const proto::WaitingIn& w = g.waiting();
    collectives.push_back(Value(Value::Map{
        {"group", g.group()},
        {"op", w.op()},
        {"key", w.key()},
        {"waiting_for",
         Value(Value::List(w.waiting_for().begin(), w.waiting_for().end()))},
        {"waiting_ms", w.waiting_ms()}}));
  }
  return Value(Value::Map{{"worker", options_.name},
                          {"pid", static_cast<int64_t>(getpid())},
                          {"threads", std::move(threads)},
                          {"calls", std::move(calls)},
                          {"collectives", std::move(collectives)}});
}

absl::Status RpcAgent::StartTelemetry() {
  FERRY_ASSIGN_OR_RETURN(
      tracer_, Tracer::Open({.worker = options_.name,
                             .trace_file = options_.telemetry.trace_file}));
  if (const std::string& listen = options_.telemetry.metrics_listen;
      !listen.empty()) {
    // Plain HTTP: served where plaintext gRPC would be.
    FERRY_ASSIGN_OR_RETURN(HostPort bind, ParseHostPort(listen));
    if (absl::Status s = security_->CheckServe(bind.host); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--metrics_listen=", listen,
                       " (plain HTTP, no authentication): ", s.message()));
    }
    FERRY_ASSIGN_OR_RETURN(metrics_server_,
                           MetricsServer::Start(listen, metrics_));
  }
  return absl::OkStatus();
}

void RpcAgent::StartHeartbeatProbe() {
  // The master has no heartbeat to itself; etcd's is etcd's.
  if (!embedded() || options_.rank == 0) return;
  heartbeat_probe_ = HeartbeatProbe::Start(
      channels_->ForMembership(master_address_), timers_, metrics_);
}

void RpcAgent::ReportEvent(absl::string_view event,
                           absl::string_view detail) const {
  if (options_.on_event) options_.on_event(event, detail);
}

void RpcAgent::OnNodeDown(uint64_t node, const absl::Status& reason) {
  // Its credential names nobody any more: a fenced or departed node's late
  // calls are refused.
  authenticator_->Forget(node);
  if (caller_ != nullptr) caller_->FailNode(node, reason);
  const std::string line =
      absl::StrCat(NodeLabel(node), ": ", reason.message());
  // Workers are few and each matters; clients may come and go by the
  // thousand, so their departures are summarized.
  if (IsWorkerNode(node)) {
    ReportEvent("peer_down", line);
    const int rank = static_cast<int>(node);
    // Both backends word a graceful departure so (membership_client.cc,
    // etcd_backend.cc).
    events_->Record({.kind = absl::EndsWith(reason.message(), "left the job")
                                 ? "left"
                                 : "died",
                     .rank = rank,
                     .worker = NodeLabel(node),
                     .detail = std::string(reason.message())});
  } else {
    churn_->Departed(line);
  }
}

void RpcAgent::OnRejoined(const WorkerInfo& worker, uint64_t incarnation) {
  // The layers above hold this directory: calls, RRefs and collectives
  // reach the new incarnation's address from now on.
  absl::Status replaced = directory_.Replace(worker);
  // Its calls present credentials checked with its new key; the old
  // one's name nobody (forgotten when the old incarnation went down).
  if (replaced.ok() && !worker.public_key.empty()) {
    authenticator_->Admit(WorkerNode(worker.rank), worker.public_key);
  }
  const std::string detail =
      replaced.ok() ? absl::StrFormat("%s at %s (incarnation %016x)",
                                      worker.name, worker.address, incarnation)
                    : std::string(replaced.message());
  ReportEvent("peer_rejoined", detail);
  if (replaced.ok()) {
    events_->Record({.kind = "replaced",
                     .rank = worker.rank,
                     .worker = worker.name,
                     .detail = detail});
  }
}

void RpcAgent::RegisterEventsBuiltin() {
  absl::Status s = registry_.RegisterAsync(
      "ferry.membership_events",
      [this](const CallContext&, std::vector<Value> args) -> Future<Value> {
        if (args.size() != 2 || !args[0].is_int() || !args[1].is_int()) {
          return Future<Value>::Ready(absl::InvalidArgumentError(
              "ferry.membership_events(after: int, wait_ms: int)"));
        }
        // At most 30 s held: a watcher polls again.
        const int64_t wait_ms = std::clamp<int64_t>(args[1].as_int(), 0, 30000);
        return events_->Poll(args[0].as_int(), absl::Milliseconds(wait_ms))
            .Map([this](
                     const absl::StatusOr<std::vector<MembershipEvent>>& events)
                     -> absl::StatusOr<Value> {
              if (!events.ok()) return events.status();
              Value::List list;
              for (const MembershipEvent& e : *events) {
                list.push_back(EventValue(e));
              }
              return Value(Value::Map{{"events", Value(std::move(list))},
                                      {"last", events_->last()},
                                      {"worker", options_.name}});
            });
      },
      "ferry.membership_events(after: int, wait_ms: int) -> map",
      {.doc = "this worker's membership events numbered above `after` "
              "(deaths, departures, replacements, revocations), waiting up "
              "to `wait_ms` (at most 30 s) for one: what `ferryctl watch` "
              "polls",
       .run_inline = true});
  (void)s;  // A fixed, valid, unique name.
}

void RpcAgent::OnFenced(const absl::Status& reason) {
  ReportEvent("fenced", reason.message());
  EndJob(absl::UnavailableError(
      absl::StrCat(options_.name, " was fenced: ", reason.message())));
}

void RpcAgent::OnMasterLost(const absl::Status& reason) {
  ReportEvent("master_lost",
              absl::StrCat(reason.message(),
                           "; the job is over: failing every pending call "
                           "and op, then exiting"));
  EndJob(absl::UnavailableError(absl::StrCat(
      options_.name, " stopped: the job ended: ", reason.message())));
}

void RpcAgent::EndJob(absl::Status why) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return;  // Already on its way out.
    if (exit_status_.ok()) exit_status_ = why;
  }
  // Called on a gRPC or timer thread: stopping here would wait on itself.
  RunInBackground([this, why] { StopServing(why); });
}

absl::Status RpcAgent::exit_status() const {
  absl::MutexLock lock(&mu_);
  return exit_status_;
}

std::string RpcAgent::NodeLabel(uint64_t node) const {
  if (!IsWorkerNode(node))
    return absl::StrCat("client", node - kFirstClientNode);
  if (node < static_cast<uint64_t>(directory_.world_size())) {
    return directory_.at(static_cast<int>(node)).name;
  }
  return IdentityLabel(node);  // Not (yet) in the directory.
}

absl::Duration RpcAgent::Resolve(const CallOptions& options) const {
  return CallTimeout(*timers_->clock(), options, options_.default_timeout);
}

CallOptions NestedIn(const CallContext& ctx, CallOptions options) {
  options.cancellation = ctx.cancellation;
  if (!options.trace.valid()) options.trace = ctx.trace;
  options.deadline = std::min(options.deadline, ctx.deadline);
  return options;
}

Future<Value> RpcAgent::RpcAsync(const std::string& to, const std::string& fn,
                                 std::vector<Value> args, CallOptions options) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning && state_ != State::kStopping) {
      return Future<Value>::Ready(absl::FailedPreconditionError(
          absl::StrCat(options_.name, " is not running")));
    }
  }
  absl::StatusOr<const WorkerInfo*> peer = directory_.Resolve(to);
  if (!peer.ok()) return Future<Value>::Ready(peer.status());
  return caller_->Call(**peer, fn, std::move(args), Resolve(options),
                       options.create_rref, options.cancellation, options.trace,
                       std::move(options.kwargs));
}

absl::StatusOr<Value> RpcAgent::RpcSync(const std::string& to,
                                        const std::string& fn,
                                        std::vector<Value> args,
                                        CallOptions options) {
  const absl::Duration timeout = Resolve(options);
  Future<Value> call = RpcAsync(to, fn, std::move(args), std::move(options));
  WaitNote note(absl::StrCat("call ", fn, " on ", to));
  return AwaitCall(call, timeout);
}

absl::Status RpcAgent::Drain(absl::Time deadline) {
  absl::Status status;
  const Clock& clock = *timers_->clock();
  if (!caller_->WaitIdle(TimeLeft(clock, deadline))) {
    status = absl::DeadlineExceededError(
        absl::StrCat(caller_->inflight(), " outgoing call(s) still running"));
  }
  for (AgentExtension* e : extensions_) {
    absl::Status s = e->Drain(deadline);
    if (status.ok()) status = s;
  }
  if (!call_service_->WaitIdle(TimeLeft(clock, deadline)) && status.ok()) {
    status = absl::DeadlineExceededError(absl::StrCat(
        call_service_->inflight(), " incoming call(s) still running"));
  }
  return status;
}

void RpcAgent::WaitOthersGone(absl::Time deadline) {
  // Checked every 10 ms of the timers' clock (so a test steps it); ends at
  // once if the timers are stopped.
  while (timers_->clock()->Now() < deadline) {
    int gone = 0;
    for (int r = 1; r < options_.world_size; ++r) {
      if (membership_.DownReason(WorkerNode(r)).has_value()) ++gone;
    }
    if (gone == options_.world_size - 1) return;
    if (!SleepOn(*timers_, absl::Milliseconds(10))) return;
  }
}

absl::Status RpcAgent::Shutdown(std::optional<absl::Duration> timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return absl::OkStatus();
    state_ = State::kStopping;
  }
  const absl::Duration t = timeout.value_or(options_.shutdown_timeout);
  ReportEvent("shutting_down",
              absl::StrCat("timeout_ms=", absl::ToInt64Milliseconds(t)));
  absl::Status status = Annotate(backend_->Barrier("shutdown.enter", t),
                                 "shutdown: waiting for all workers");
  absl::Status drained =
      Annotate(Drain(timers_->clock()->Now() + t), "shutdown: draining");
  if (status.ok()) status = drained;
  absl::Status agreed = Annotate(backend_->Barrier("shutdown.drained", t),
                                 "shutdown: waiting for all workers to drain");
  if (status.ok()) status = agreed;
  call_service_->StopAccepting();
  if (options_.rank == 0 && backend_->rank0_is_master()) {
    // They still need the master to leave.
    WaitOthersGone(timers_->clock()->Now() + t);
  } else {
    backend_->Leave(absl::Seconds(2)).IgnoreError();
  }
  StopServing(StoppedStatus());
  return Annotate(status, options_.name);
}

absl::Status RpcAgent::Leave() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return absl::OkStatus();
    state_ = State::kStopping;
  }
  ReportEvent("leaving", "");
  call_service_->StopAccepting();
  absl::Status status =
      Drain(timers_->clock()->Now() + options_.shutdown_timeout);
  backend_->Leave(absl::Seconds(2)).IgnoreError();
  StopServing(StoppedStatus());
  return Annotate(status, absl::StrCat(options_.name, ": leave"));
}

void RpcAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kNew) {
      // Never started: nothing to tear down, now or later (a second Stop,
      // from the destructor, must not reach extensions already destroyed).
      state_ = State::kStopped;
      teardown_started_ = true;
      return;
    }
  }
  StopServing(StoppedStatus());
}

absl::Status RpcAgent::StoppedStatus() const {
  return absl::UnavailableError(absl::StrCat(options_.name, " stopped"));
}

// Teardown order, and why:
// 1. membership client first: a node that is stopping must not see peers
//    die (or itself fenced) and react while its parts go away;
// 2. extensions (RRefs, collectives) next: they fail their waiters with
//    `stopped` while the caller and timers they use still work;
// 3. the call service aborts what it serves before the server shuts down,
//    so handlers answer with the cause instead of gRPC's bare CANCELLED;
// 4. the rendezvous (rank 0) before the server: held polls and barriers
//    are answered, not left to the server's one-second grace;
// 5. outgoing calls cancelled before the server waits, since a handler may
//    be waiting on one of them;
// 6. the executor and then the caller drain (bounded), so no task runs or
//    completion arrives after the timers stop; timers last, because every
//    step above may still cancel a timer.
void RpcAgent::StopServing(const absl::Status& stopped) {
  {
    absl::MutexLock lock(&mu_);
    if (teardown_started_) {
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return state_ == State::kStopped;
      };
      mu_.Await(absl::Condition(&stopped));
      return;
    }
    teardown_started_ = true;
    state_ = State::kStopping;
  }
  if (backend_ != nullptr) backend_->Stop();
  churn_->Stop();
  events_->Stop();
  if (heartbeat_probe_ != nullptr) heartbeat_probe_->Stop();
  for (AgentExtension* e : extensions_) e->Stop();
  if (call_service_ != nullptr) call_service_->Abort(stopped);
  if (rendezvous_ != nullptr) rendezvous_->Shutdown();
  if (caller_ != nullptr) caller_->CancelAll(stopped);
  if (server_ != nullptr) {
    server_->Shutdown(WallDeadlineIn(absl::Seconds(1)));
  }
  executor_->Stop(absl::Seconds(2));
  if (caller_ != nullptr) caller_->WaitIdle(absl::Seconds(2));
  if (owned_timers_ != nullptr) owned_timers_->Stop();
  ReportEvent("stopped", "");
  absl::MutexLock lock(&mu_);
  state_ = State::kStopped;
}

void RpcAgent::RequestShutdown(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) timeout = options_.shutdown_timeout;
  bool joining;
  {
    absl::MutexLock lock(&mu_);
    joining = state_ == State::kListening;
    // A `ferryctl down` racing a worker's join (it is listed once it
    // reserved its rank) must not be lost: Start() runs it once joined.
    if (joining) deferred_shutdown_ = timeout;
  }
  ReportEvent("shutdown_requested",
              absl::StrCat("timeout_ms=", absl::ToInt64Milliseconds(timeout),
                           joining ? " (once joined)" : ""));
  if (!joining) {
    RunInBackground([this, timeout] { Shutdown(timeout).IgnoreError(); });
  }
}

void RpcAgent::RunInBackground(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kRunning || shutdown_thread_.joinable()) return;
  shutdown_thread_ = std::thread(std::move(work));
}

bool RpcAgent::WaitStopped(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == State::kStopped;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&stopped), timeout);
}

bool RpcAgent::stopped() const {
  absl::MutexLock lock(&mu_);
  return state_ == State::kStopped;
}

proto::WorkerStatus RpcAgent::Status() const {
  proto::WorkerStatus s;
  s.set_name(options_.name);
  s.set_rank(options_.rank);
  s.set_address(address_);
  s.set_pid(getpid());
  s.set_uptime_ms(absl::ToInt64Milliseconds(Clock::Real()->Now() - started_));
  s.set_heap_bytes(HeapBytesInUse());
  int64_t in = call_service_ ? call_service_->inflight() : 0;
  int64_t out = caller_ ? caller_->inflight() : 0;
  s.set_inflight(in + out);
  s.set_inflight_incoming(in);
  s.set_inflight_outgoing(out);
  s.set_calls_served(call_service_ ? call_service_->served() : 0);
  s.set_functions(registry_.size());
  if (call_stream_service_ != nullptr) {
    s.set_stream_bytes(call_stream_service_->budget().used());
    s.set_reply_bytes(call_service_->replies().used());
  }
  s.set_open_streams(open_streams_->used());
  s.set_prejoin_calls(prejoin_calls_->used());
  for (uint64_t node : membership_.DownNodes()) {
    if (IsWorkerNode(node)) s.add_dead_peers(NodeLabel(node));
  }
  bool running;
  {
    absl::MutexLock lock(&mu_);
    static constexpr const char* kNames[] = {"new", "starting", "running",
                                             "stopping", "stopped"};
    s.set_state(kNames[static_cast<int>(state_)]);
    running = state_ == State::kRunning;
  }
  // backend_ is set before the state is running, and kept.
  if (running) {
    if (std::optional<absl::Time> at = backend_->lease_expires_at()) {
      s.set_membership_lease_ms(std::max<int64_t>(
          0, absl::ToInt64Milliseconds(*at - timers_->clock()->Now())));
    }
  }
  for (const auto& [flag, value] : LimitFlags(options_.limits)) {
    (*s.mutable_limits())[flag] = value;
  }
  if (metrics_server_ != nullptr)
    s.set_metrics_address(metrics_server_->address());
  for (const AgentExtension* e : extensions_) e->FillStatus(&s);
  return s;
}

}  // namespace ferry
