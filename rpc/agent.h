// RpcAgent: one worker of a job. It runs a gRPC server (callback API) with
// the function registry, joins the job at the master (rank 0, which also
// hosts the rendezvous), keeps membership by long polling, and calls other
// workers over one reused channel each.
//
//   AgentOptions o;
//   o.rank = 1; o.world_size = 3; o.master = "10.0.0.1:29500";
//   RpcAgent agent(o);
//   agent.registry().Register("scale", [](const Tensor& t, double k) {…});
//   FERRY_RETURN_IF_ERROR(agent.Start());            // returns when all joined
//   absl::StatusOr<Value> r = agent.RpcSync("worker2", "add", {a, b});
//   agent.Shutdown();                                // graceful, collective
//
// Layers above (RRefs, collectives) plug in through AddService/AddExtension
// before Start().
#ifndef FERRY_RPC_AGENT_H_
#define FERRY_RPC_AGENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/node_key.h"
#include "rpc/auth/security.h"
#include "rpc/base/executor.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/base/quota.h"
#include "rpc/base/timers.h"
#include "rpc/call_service.h"
#include "rpc/call_stream_service.h"
#include "rpc/caller.h"
#include "rpc/channels.h"
#include "rpc/churn_log.h"
#include "rpc/heartbeat_probe.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/directory_service.h"
#include "rpc/membership/membership.h"
#include "rpc/membership/membership_backend.h"
#include "rpc/membership/membership_client.h"
#include "rpc/membership/membership_events.h"
#include "rpc/membership/rendezvous_service.h"
#include "rpc/metrics.h"
#include "rpc/metrics_server.h"
#include "rpc/peer_budget.h"
#include "rpc/registry.h"
#include "rpc/telemetry_options.h"
#include "rpc/tracing.h"
#include "rpc/wire/bounded_service.h"

namespace ferry {

class StacksService;  // rpc/stacks_service.h

struct AgentOptions {
  std::string name;  // Default "worker<rank>".
  int rank = 0;
  int world_size = 1;
  // host:port of rank 0. Rank 0 listens there; if empty, rank 0 listens on
  // `listen` and is its own master.
  std::string master;
  // host:port to listen on; port 0 picks one. Default: the master's host
  // (or 127.0.0.1) with port 0.
  std::string listen;
  absl::Duration default_timeout = absl::Seconds(60);  // Per call; 0 = none.
  absl::Duration startup_timeout = absl::Seconds(60);
  absl::Duration shutdown_timeout = absl::Seconds(10);
  int executor_threads = 8;
  // A node out of contact with the master for this long is declared dead
  // (by the master); the master out of contact with a worker for this long
  // is declared dead by that worker, which then ends (exit_status()). Why
  // 30 s: tools/ferryd/main.cc.
  absl::Duration heartbeat_timeout = absl::Seconds(30);
  // poll_hold; master_timeout is set from heartbeat_timeout.
  MembershipOptions membership;
  // Where membership is kept (membership_backend.h), made once by Start()
  // with the agent's timers. Unset: the embedded master (rank 0, at
  // `master`).
  std::function<absl::StatusOr<std::unique_ptr<MembershipBackend>>(Timers*)>
      membership_backend;
  // What one peer may make this worker hold or do (rpc/base/limits.h).
  Limits limits;
  std::shared_ptr<const Security> security;  // Null: local, no token.
  // Serve gRPC's reflection service (it is then on for every server this
  // process builds).
  bool reflection = false;
  ChannelOptions channels;
  // Also listen on a unix-abstract socket for same-host peers.
  bool local_socket = true;
  // The timers, and so the clock, of every deadline, lease, heartbeat and
  // timer of this worker. Null: its own, on the real (monotonic) clock.
  // Tests pass ManualTimers to step time; those are not stopped by the
  // agent and must outlive it.
  Timers* timers = nullptr;
  // Told of lifecycle events: "listening", "joined", "peer_down",
  // "peer_rejoined", "fenced",
  // "master_lost", "shutdown_requested", "shutting_down", "leaving",
  // "stopped". Called on
  // whichever thread the event happens; must be quick and thread-safe.
  std::function<void(absl::string_view event, absl::string_view detail)>
      on_event;
  // Metrics and traces (README "Observing a job").
  TelemetryOptions telemetry;
};

// A layer above RPC that lives inside the agent (RRefs, collectives).
class AgentExtension {
 public:
  virtual ~AgentExtension() = default;
  // Waits (until `deadline`, on the agent's timers' clock) for the
  // extension's outstanding messages.
  virtual absl::Status Drain(absl::Time /*deadline*/) {
    return absl::OkStatus();
  }
  // Stops: after this, no callbacks into the agent.
  virtual void Stop() {}
  virtual void FillStatus(proto::WorkerStatus* /*status*/) const {}
};

// Options for a call a running function makes on behalf of its own call
// (`ctx`): it is cancelled with that call and ends by its deadline.
//
//   registry.RegisterAsync("relay", [&](const CallContext& ctx, auto args) {
//     return agent.RpcAsync("worker2", "slow", args, NestedIn(ctx));
//   }, …);
// It continues the function's trace, too.
CallOptions NestedIn(const CallContext& ctx, CallOptions options = {});

class RpcAgent {
 public:
  explicit RpcAgent(AgentOptions options);
  // Stops abruptly if still running.
  ~RpcAgent();

  RpcAgent(const RpcAgent&) = delete;
  RpcAgent& operator=(const RpcAgent&) = delete;

  // ---- Before Start ----
  Registry& registry() { return registry_; }
  // A service whose every request is parsed within the limits
  // (rpc/wire/bounded_service.h); Start refuses one with a method that is not.
  void AddService(BoundedServiceBase* service);
  // The server's one generic (raw bytes) service, for streams whose framing
  // is not protobuf's (collectives).
  void SetGenericService(grpc::CallbackGenericService* service);
  void AddExtension(AgentExtension* extension);
  // How RRefs in call values cross the wire, and who keeps remote()
  // results (the RRef layer); both must outlive the agent's calls.
  void SetCodecs(CodecFactory* codecs);
  void SetRemoteHandler(RemoteHandler* remote);

  // Starts the server (if Listen() was not called), joins the job and
  // starts membership. Returns when all world_size workers joined.
  // DEADLINE_EXCEEDED names missing ranks (or the unreachable master);
  // ALREADY_EXISTS/INVALID_ARGUMENT for a clash.
  absl::Status Start();

  // Starts only the server and returns the address it listens on (so rank
  // 0's picked port can be handed to the others before they join).
  absl::StatusOr<std::string> Listen();

  // ---- After Start ----
  const Directory& directory() const { return directory_; }
  const std::string& name() const { return options_.name; }
  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  const std::string& master_address() const { return master_address_; }
  const std::string& address() const { return address_; }

  // Calls `fn` on `to` (a worker name or rank number).
  Future<Value> RpcAsync(const std::string& to, const std::string& fn,
                         std::vector<Value> args, CallOptions options = {});
  absl::StatusOr<Value> RpcSync(const std::string& to, const std::string& fn,
                                std::vector<Value> args,
                                CallOptions options = {});

  // Graceful, collective shutdown (like torch's rpc.shutdown()): waits
  // (bounded) until every worker called it, drains outstanding calls and
  // extension messages, then stops. Never hangs: each phase is bounded by
  // `timeout` (default shutdown_timeout); DEADLINE_EXCEEDED reports which
  // phase gave up (the worker still stops).
  absl::Status Shutdown(std::optional<absl::Duration> timeout = std::nullopt);
  // Graceful leave of this worker alone (SIGTERM): drains its own work,
  // tells the master it leaves (peers see "left", not "died"), stops.
  absl::Status Leave();
  // Abrupt local stop: cancels everything now.
  void Stop();

  // Starts Shutdown(timeout) on a background thread (the Shutdown RPC);
  // a timeout <= 0 means shutdown_timeout. Asked while still joining
  // (listening, job not formed), the shutdown starts once the job forms.
  void RequestShutdown(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the agent stopped (by any path) or `timeout` passed.
  bool WaitStopped(absl::Duration timeout);
  bool stopped() const;
  // Why the agent ended by itself: UNAVAILABLE naming the cause when it
  // was fenced (declared dead by the master) or the master (worker0) died
  // or left — the job is over for it. OK otherwise (Shutdown, Leave, Stop).
  absl::Status exit_status() const ABSL_LOCKS_EXCLUDED(mu_);

  proto::WorkerStatus Status() const;

  // Tells options.on_event (if set) about a lifecycle event.
  void ReportEvent(absl::string_view event, absl::string_view detail) const;

  // ---- What the agent hands out, and to whom ----
  // Each accessor below has named users; one whose users went, goes. The
  // layers above reach the agent in one place each: the collectives through
  // CollectivesForAgent (collectives/host/agent_host.cc, which builds their
  // CollectiveHost), RRefs through RRefContext::ForWorker (rref/
  // rref_context.cc, which fills their Host); the worker runtime
  // (tools/runtime/worker_impl.*, worker.cc) and ferryd own the agent.
  //   timers()             agent_host, rref_context, worker_impl (store)
  //   executor()           agent_host (tasks, flight-recorder dumps)
  //   channels()           agent_host (exchange), rref_context; tests
  //   membership()         agent_host, rref_context; tests (DownReason)
  //   events()             agent_host (revocations), worker.cc
  //                        (Subscribe); tests (AwaitGone)
  //   caller()             rref_context
  //   membership_backend() agent_host (the store, OpenStore)
  //   authenticator()      agent_host (exchange), rref_context,
  //                        worker_impl (store)
  //   key()                tests/rpc/forged_identity_test (a worker
  //                        forging credentials with its own key)
  //   default_timeout()    agent_host, rref_context
  //   limits()             agent_host, rref_context
  //   open_streams()       agent_host (exchange)
  //   metrics()            agent_host; tests/rpc/stream_call_test
  //   tracer(), tracing()  agent_host; tests/rpc/tracing_test (tracer)
  // Above: registry() (agent_host, rref_context, worker_impl: builtins
  // before Start), ReportEvent() (rref_context: its Host's log), and
  // directory(), name(), rank(), world_size(), address(), master_address()
  // (the same layers, ferryd, worker.cc).
  Timers& timers() { return *timers_; }
  Executor& executor() { return *executor_; }
  ChannelPool& channels() { return *channels_; }
  Membership& membership() { return membership_; }
  // Deaths, departures, replacements, revocations (membership_events.h).
  MembershipEvents& events() { return *events_; }
  Caller& caller() { return *caller_; }
  MembershipBackend& membership_backend() { return *backend_; }
  // Who a call is: its handlers check the identities messages claim.
  const Authenticator& authenticator() const { return *authenticator_; }
  // This incarnation's key pair (its public half is in the directory).
  const NodeKey& key() const { return *key_; }
  absl::Duration default_timeout() const { return options_.default_timeout; }
  // What one peer may make this worker hold or do.
  const Limits& limits() const { return options_.limits; }
  // Streams open here at once (--max_open_streams, and
  // --max_open_streams_per_peer for one peer): every streaming service
  // counts its incoming streams in it.
  const std::shared_ptr<PeerBudget>& open_streams() const {
    return open_streams_;
  }
  // Where layers count (null when TelemetryOptions::metrics is off) and
  // record spans (rpc/tracing.h; set once the server started).
  Metrics* metrics() const {
    return options_.telemetry.metrics ? metrics_.get() : nullptr;
  }
  Tracer* tracer() const { return tracer_.get(); }
  bool tracing() const { return options_.telemetry.tracing; }

 private:
  absl::Status StartServer();
  absl::Status JoinAndWatch();
  absl::StatusOr<std::unique_ptr<MembershipBackend>> MakeBackend();
  bool embedded() const { return !options_.membership_backend; }
  void OnNodeDown(uint64_t node, const absl::Status& reason);

  void OnFenced(const absl::Status& reason);
  void OnRejoined(const WorkerInfo& worker, uint64_t incarnation);
  // Worker0 died or left: this worker fails everything pending, naming
  // it, and stops (a job without its master cannot go on).
  void OnMasterLost(const absl::Status& reason);
  // Records why the agent ends by itself and stops it in the background.
  void EndJob(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `work` on the shutdown thread unless one already runs.
  void RunInBackground(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  // `deadline` on the timers' clock.
  absl::Status Drain(absl::Time deadline);
  void WaitOthersGone(absl::Time deadline);
  // Stops everything; pending calls fail with `reason` (UNAVAILABLE).
  void StopServing(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // UNAVAILABLE "<name> stopped".
  absl::Status StoppedStatus() const;
  absl::Duration Resolve(const CallOptions& options) const;
  // Metrics and tracing: the builtins ferry.metrics and ferry.trace, the
  // /metrics server, the heartbeat probe.
  void RegisterTelemetryBuiltins();
  absl::Status StartTelemetry();
  void StartHeartbeatProbe();
  // Registers ferry.membership_events (events_'s Poll).
  void RegisterEventsBuiltin();
  // What ferry.stacks answers.
  Value StacksValue() const;
  // A node's name for messages: "worker2", "client3".
  std::string NodeLabel(uint64_t node) const;

  AgentOptions options_;
  std::shared_ptr<const Security> security_;
  const uint64_t incarnation_;
  // This incarnation's identity (rpc/auth/node_key.h).
  const std::shared_ptr<const NodeKey> key_;
  const absl::Time started_;

  Registry registry_;
  Membership membership_;
  std::unique_ptr<Timers> owned_timers_;  // Unless options.timers is set.
  Timers* const timers_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<ChannelPool> channels_;
  // Streams open (--max_open_streams); calls waiting for the job to form
  // (--max_prejoin_calls: the call service's and the authenticator's).
  const std::shared_ptr<PeerBudget> open_streams_;
  const std::shared_ptr<Quota> prejoin_calls_;
  // Checks every call's token and credential before its body is read.
  std::shared_ptr<Authenticator> authenticator_;
  std::unique_ptr<Caller> caller_;
  // Clients' departures, at most a line per interval (rpc/churn_log.h).
  std::unique_ptr<ChurnLog> churn_;
  std::unique_ptr<MembershipEvents> events_;
  std::unique_ptr<CallService> call_service_;
  std::unique_ptr<CallStreamService> call_stream_service_;
  std::unique_ptr<RendezvousService> rendezvous_;        // Rank 0.
  std::unique_ptr<DirectoryService> directory_service_;  // Other ranks.
  std::unique_ptr<MembershipBackend> backend_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<BoundedServiceBase*> services_;
  grpc::CallbackGenericService* generic_service_ = nullptr;
  std::vector<AgentExtension*> extensions_;
  CodecFactory* codecs_ = nullptr;
  RemoteHandler* remote_ = nullptr;
  // Always made (scrape-time gauges); counted into when telemetry.metrics.
  const std::shared_ptr<Metrics> metrics_;
  std::unique_ptr<Tracer> tracer_;  // Set by StartTelemetry.
  std::shared_ptr<HeartbeatProbe> heartbeat_probe_;

  // Set by Start, then constant (but for entries a replacement worker
  // takes over: Directory::Replace is thread-safe).
  Directory directory_;
  std::string master_address_;
  std::string address_;
  std::string self_local_address_;

  mutable absl::Mutex mu_;
  enum class State { kNew, kListening, kRunning, kStopping, kStopped };
  State state_ ABSL_GUARDED_BY(mu_) = State::kNew;
  bool teardown_started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread shutdown_thread_ ABSL_GUARDED_BY(mu_);
  // A Shutdown asked for while joining: its timeout, run once running.
  std::optional<absl::Duration> deferred_shutdown_ ABSL_GUARDED_BY(mu_);
  absl::Status exit_status_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed first, so no scrape or capture reads the agent while
  // it goes.
  std::unique_ptr<StacksService> stacks_;
  std::unique_ptr<MetricsServer> metrics_server_;
};

}  // namespace ferry

#endif  // FERRY_RPC_AGENT_H_
