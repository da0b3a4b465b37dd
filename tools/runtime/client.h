// ferry::Client: a program that drives a job without being one of its
// ranks (a launcher, a notebook, a service front end, ferryctl). It
// registers with the master, learns the workers, and calls any of them;
// it holds RRefs under its own lease like a worker.
//
//   absl::StatusOr<std::unique_ptr<ferry::Client>> client =
//       ferry::Client::Connect({.master = "10.0.0.1:29500"});
//   absl::StatusOr<ferry::Value> r = (*client)->RpcSync("worker1", "add",
//                                                        {1, 2});
//
// Timeouts: an unset timeout is the client's default_timeout; zero means
// none. Thread-safe.
#ifndef FERRY_TOOLS_RUNTIME_CLIENT_H_
#define FERRY_TOOLS_RUNTIME_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rpc/auth/security_options.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"
#include "rref/rref.h"
#include "tools/runtime/status.h"

namespace ferry {

struct ClientOptions {
  std::string master;       // host:port of rank 0.
  std::string description;  // Shown in the master's log ("my-launcher").
  // How long to wait for the master and for the job to be formed.
  absl::Duration connect_timeout = absl::Seconds(30);
  absl::Duration default_timeout = absl::Seconds(60);  // Per call; 0 = none.
  // TLS and token files. Without a token file (and not insecure), the
  // token of the job this user's `ferryctl up` started at `master`, if any.
  SecurityOptions security;
  // How long owners keep this client's copies if it stops renewing.
  absl::Duration rref_lease = absl::Seconds(10);
  int64_t max_rrefs = int64_t{1} << 20;
};

class ClientImpl;

class Client {
 public:
  // DEADLINE_EXCEEDED if the master cannot be reached or the job is not
  // formed within connect_timeout; INVALID_ARGUMENT for bad security files.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);
  // Close().
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // "client<N>", as workers see it.
  const std::string& name() const;
  // The workers' names, by rank.
  std::vector<std::string> workers() const;

  Future<Value> RpcAsync(const std::string& to, const std::string& fn,
                         std::vector<Value> args,
                         std::optional<absl::Duration> timeout = std::nullopt);
  absl::StatusOr<Value> RpcSync(
      const std::string& to, const std::string& fn, std::vector<Value> args,
      std::optional<absl::Duration> timeout = std::nullopt);
  // `fn(args…)` on `to`, which keeps the result as the RRef's owner.
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

  // A collective run by the workers on inputs sent from here, in
  // ferryctl's request form (README, `ferryctl collective --help`):
  //   {"ranks": [input of rank 0, …], "timeout_ms": …, <the op's params>}
  // returns {"ranks": [output of rank 0, …]}.
  absl::StatusOr<Value> RunCollective(absl::string_view op,
                                      const Value& request);

  absl::StatusOr<WorkerStatus> GetStatus(
      const std::string& worker,
      std::optional<absl::Duration> timeout = std::nullopt);
  absl::StatusOr<std::vector<FunctionInfo>> ListFunctions(
      const std::string& worker,
      std::optional<absl::Duration> timeout = std::nullopt);
  // Asks every worker to shut down gracefully (they agree among
  // themselves, bounded by `shutdown_timeout`); returns once asked.
  absl::Status ShutdownJob(absl::Duration shutdown_timeout);

  // Releases this client's RRefs and leaves the job (the master records a
  // departure, not a death). Idempotent.
  void Close();

 private:
  explicit Client(std::unique_ptr<ClientImpl> impl);
  friend ClientImpl& Impl(Client& client);

  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_CLIENT_H_
