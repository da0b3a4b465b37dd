// ferry::Worker: this process as one worker of a job. It serves the
// functions registered on it, calls other workers, owns and references
// remote values (RRefs), and runs collectives with the others.
//
//   ferry::Worker worker({.rank = 1, .world_size = 2,
//                         .master = "10.0.0.1:29500"});
//   worker.Register("scale", [](const ferry::Tensor& t, double k) {…});
//   absl::Status s = worker.Start();  // returns once every rank joined
//   absl::StatusOr<ferry::Value> r = worker.RpcSync("worker0", "add", {1, 2});
//   absl::StatusOr<ferry::RRef> ones = worker.Remote("worker0", "ones", {…});
//   absl::StatusOr<ferry::Tensor> sum = ferry::AllReduce(worker.world(), t);
//   worker.Shutdown();  // graceful and collective, like torch's rpc.shutdown
//
// Timeouts: an unset timeout is the worker's default_timeout; zero means
// none. Every wait is bounded by one of them.
//
// Thread-safe after Start(). Register before it, or after: the registry is
// thread-safe, and a function registered later is callable once Register
// returned (the Python package registers functions at any time).
#ifndef FERRY_TOOLS_RUNTIME_WORKER_H_
#define FERRY_TOOLS_RUNTIME_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectives/op/process_group.h"
#include "collectives/transport/config.h"
#include "rpc/auth/security_options.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/function.h"
#include "rpc/membership/membership_event.h"
#include "rpc/telemetry_options.h"
#include "rpc/value/value.h"
#include "rref/rref.h"
#include "tools/runtime/status.h"

namespace ferry {

struct WorkerOptions {
  std::string name;  // Default "worker<rank>".
  int rank = 0;
  int world_size = 1;
  // host:port of rank 0, which listens there and hosts the rendezvous.
  // Empty: rank 0 listens on `listen` and is its own master.
  std::string master;
  // host:port to listen on (port 0 picks one). Default: the master's host.
  std::string listen;
  // Where membership lives: empty for the embedded master (`master`), or
  // "etcd://HOST:PORT[,HOST:PORT…]/JOB" (`master` unused; the rank must be
  // given), reached with the etcd_* settings (PEM files; a user whose
  // password is the first line of a file).
  std::string rendezvous;
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  std::string etcd_user;
  std::string etcd_password_file;
  absl::Duration default_timeout = absl::Seconds(60);  // Per call; 0 = none.
  absl::Duration startup_timeout = absl::Seconds(60);
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // A node out of contact this long is declared dead (the master, by the
  // others: the worker then fails its pending work and stops).
  absl::Duration heartbeat_timeout = absl::Seconds(30);
  int executor_threads = 8;  // Threads running registered functions.
  // How long owners keep the copies of a holder that stopped renewing.
  absl::Duration rref_lease = absl::Seconds(10);
  int64_t max_rrefs = int64_t{1} << 20;  // Live RRef copies per holder.
  Limits limits;                         // What one peer may make it hold.
  SecurityOptions security;              // TLS and token files.
  bool local_socket = true;              // Same-host peers over a unix socket.
  // Large calls between same-host peers in memory files, not the socket.
  bool shared_memory = true;
  // Collectives' settings, the flight recorder's among them
  // (flight_recorder_entries, dump_dir).
  CollectiveConfig collectives;
  // Metrics (/metrics on telemetry.metrics_listen) and traces (spans to
  // telemetry.trace_file).
  TelemetryOptions telemetry;
  // Lifecycle events ("joined", "peer_down", "stopped", …); called on any
  // thread, must be quick.
  std::function<void(absl::string_view event, absl::string_view detail)>
      on_event;
};

class Registry;
class WorkerImpl;

class Worker {
 public:
  // Configures the worker; nothing happens on the network before Start().
  explicit Worker(WorkerOptions options);
  // Stops abruptly if still running.
  ~Worker();

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // ---- Before Start (or after: see above) ----
  // A plain C++ function or lambda over Values, Tensors, numbers, strings
  // (rpc/function.h). ALREADY_EXISTS if the name is taken.
  template <typename F>
  absl::Status Register(std::string name, F fn, FunctionOptions options = {}) {
    auto [async, signature] =
        adapter_internal::Adapt(name, std::move(fn), options.params);
    return RegisterAsync(std::move(name), std::move(async),
                         std::move(signature), std::move(options));
  }
  // A function returning a Future: it holds no thread while it waits.
  absl::Status RegisterAsync(std::string name, AsyncFunction fn,
                             std::string signature,
                             FunctionOptions options = {});

  // Listens, joins the job and returns once all world_size workers joined.
  // Errors: INVALID_ARGUMENT (options), DEADLINE_EXCEEDED naming the ranks
  // that never came, ALREADY_EXISTS if the rank is taken.
  absl::Status Start();
  // Only starts listening and returns the address (so rank 0's picked port
  // can be handed to the others); Start() then joins.
  absl::StatusOr<std::string> Listen();

  // ---- After Start ----
  const std::string& name() const;
  int rank() const;
  int world_size() const;
  const std::string& address() const;
  const std::string& master_address() const;
  // The workers' names, by rank.
  std::vector<std::string> workers() const;

  // `fn(args…)` on worker `to` (a name, or a rank as "2").
  Future<Value> RpcAsync(const std::string& to, const std::string& fn,
                         std::vector<Value> args,
                         std::optional<absl::Duration> timeout = std::nullopt);
  absl::StatusOr<Value> RpcSync(
      const std::string& to, const std::string& fn, std::vector<Value> args,
      std::optional<absl::Duration> timeout = std::nullopt);
  // `fn(args…)` on `to`, which keeps the result as the RRef's owner.
  // Returns at once; the creation's errors surface on ToHere().
  absl::StatusOr<RRef> Remote(
      const std::string& to, const std::string& fn, std::vector<Value> args,
      std::optional<absl::Duration> timeout = std::nullopt);
  // The same with keyword arguments `kwargs` (name → value), for functions
  // that take them (Python's); a C++ function refuses them with
  // INVALID_ARGUMENT naming it.
  Future<Value> RpcAsync(const std::string& to, const std::string& fn,
                         std::vector<Value> args, Value::Map kwargs,
                         std::optional<absl::Duration> timeout);
  absl::StatusOr<Value> RpcSync(const std::string& to, const std::string& fn,
                                std::vector<Value> args, Value::Map kwargs,
                                std::optional<absl::Duration> timeout);
  absl::StatusOr<RRef> Remote(const std::string& to, const std::string& fn,
                              std::vector<Value> args, Value::Map kwargs,
                              std::optional<absl::Duration> timeout);
  // An RRef owned here, of a local value.
  absl::StatusOr<RRef> Wrap(Value value);

  // Every rank of the job, for collectives (collectives/collectives.h).
  ProcessGroup& world();
  // A group of some ranks (global ranks, distinct, in group order); every
  // member creates it in the same order. INVALID_ARGUMENT for bad ranks,
  // FAILED_PRECONDITION if this worker is not a member.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(
      std::vector<int> ranks);
  // The group of `ranks` for `instance`, a number every member was handed
  // alike from outside (torch's reconfigure uuid): named from it, counted
  // by nothing, so members whose own group histories differ agree on it.
  // Pinned to the members' incarnations now (process_group.h). Errors as
  // NewGroup; INVALID_ARGUMENT for an instance of 2^62 or more.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> InstanceGroup(
      std::vector<int> ranks, uint64_t instance);

  WorkerStatus status() const;

  // Calls `fn` with each membership event this worker sees from now on
  // (rpc/membership/membership_event.h: a death or departure with its cause, a
  // replacement joining, a group revoked), on the thread that saw it: it
  // must not block. Returns an id for RemoveMembershipListener.
  int64_t OnMembershipChange(std::function<void(const MembershipEvent&)> fn);
  void RemoveMembershipListener(int64_t id);

  // Graceful and collective: waits (bounded) until every worker called it,
  // drains calls and RRef messages, stops. DEADLINE_EXCEEDED says which
  // phase gave up; the worker stops anyway.
  absl::Status Shutdown(std::optional<absl::Duration> timeout = std::nullopt);
  // This worker alone leaves gracefully (peers see "left", not "died").
  absl::Status Leave();
  // Abrupt local stop.
  void Stop();
  // True once stopped (by any path) within `timeout`.
  bool WaitStopped(absl::Duration timeout);

 private:
  friend WorkerImpl& Impl(Worker& worker);
  Registry& registry();

  std::unique_ptr<WorkerImpl> impl_;
};

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_WORKER_H_
