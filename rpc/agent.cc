// RpcAgent (rpc/agent.h): construction, calls to other workers (RpcAsync,
// RpcSync and their timeouts), node labels, and the worker's status with
// the heap accounting it reports. The other concerns live beside it:
// agent_server.cc (listening and starting), agent_membership.cc (joining
// and reacting to membership), agent_telemetry.cc (builtins, metrics,
// traces, lifecycle events), agent_stop.cc (every stop path).

#include "rpc/agent.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/clock.h"
#include "rpc/base/limit_errors.h"
#include "rpc/builtins.h"
#include "rpc/stacks.h"
#include "rpc/stacks_service.h"

// AddressSanitizer: GCC says so with __SANITIZE_ADDRESS__, clang (the
// everyday compiler) only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define FERRY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERRY_ASAN 1
#endif
#endif

#if defined(FERRY_ASAN)
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
#if defined(FERRY_ASAN)
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

uint64_t RandomIncarnation() {
  return RandomU64() | 1;  // Never 0.
}

// How often a worker logs clients leaving (rpc/churn_log.h).
constexpr absl::Duration kChurnLogInterval = absl::Seconds(10);

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
