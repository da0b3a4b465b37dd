// RpcClient: drives a job from outside without being a rank (ferryctl, a
// launcher, a notebook). It registers with the master, learns the
// directory, keeps a membership poll (its liveness, and news of dead
// workers), and calls any worker.
//
//   absl::StatusOr<std::unique_ptr<RpcClient>> client =
//       RpcClient::Connect({.master = "10.0.0.1:29500"});
//   absl::StatusOr<Value> r = (*client)->RpcSync("worker1", "add", {1, 2});
//
// Internal (it includes gRPC): programs use ferry::Client
// (tools/runtime/client.h, through ferry.h), which wraps it.
#ifndef FERRY_RPC_CLIENT_H_
#define FERRY_RPC_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/auth/security.h"
#include "rpc/base/timers.h"
#include "rpc/caller.h"
#include "rpc/channels.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rpc/membership/membership_backend.h"
#include "rpc/membership/membership_client.h"

namespace ferry {

struct RpcClientOptions {
  // host:port of rank 0; or of any other worker, which answers from its
  // directory: the client then keeps no membership (learns of deaths only
  // by failed calls), which is what inspecting or shutting down a job whose
  // master died needs.
  std::string master;
  std::string description;  // Shown in the master's events ("ferryctl").
  // How long to wait for the master and the job to be formed.
  absl::Duration connect_timeout = absl::Seconds(30);
  absl::Duration default_timeout = absl::Seconds(60);
  std::shared_ptr<const Security> security;  // Null: plaintext.
  ChannelOptions channels;
  MembershipOptions membership;
  // Where membership is kept (membership_backend.h), made once by
  // Connect() with the client's timers. Unset: the embedded master at
  // `master`.
  std::function<absl::StatusOr<std::unique_ptr<MembershipBackend>>(Timers*)>
      membership_backend;
  // The timers, and so the clock, of the client's deadlines, leases and
  // heartbeats. Null: its own, on the real clock. Tests pass ManualTimers
  // to step time; those are not stopped by the client and must outlive it.
  Timers* timers = nullptr;
};

class RpcClient {
 public:
  // DEADLINE_EXCEEDED if the master cannot be reached or the job is not
  // formed within connect_timeout.
  static absl::StatusOr<std::unique_ptr<RpcClient>> Connect(
      RpcClientOptions options);
  // Close().
  ~RpcClient();

  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  const Directory& directory() const { return directory_; }
  uint64_t node() const { return node_; }
  const std::string& name() const { return name_; }
  const std::string& master() const { return options_.master; }

  Future<Value> RpcAsync(const std::string& to, const std::string& fn,
                         std::vector<Value> args, CallOptions options = {});
  absl::StatusOr<Value> RpcSync(const std::string& to, const std::string& fn,
                                std::vector<Value> args,
                                CallOptions options = {});

  absl::StatusOr<proto::WorkerStatus> GetStatus(const std::string& worker,
                                                absl::Duration timeout);
  absl::StatusOr<std::vector<proto::FunctionInfo>> ListFunctions(
      const std::string& worker, absl::Duration timeout);
  // Asks `worker` to shut down gracefully (it returns at once).
  absl::Status RequestShutdown(const std::string& worker,
                               absl::Duration shutdown_timeout,
                               absl::Duration timeout);

  // Leaves the job (so the master records a departure, not a death) and
  // cancels what is in flight. With `leave` false, only stops locally.
  void Close(bool leave = true);

  Timers& timers() { return *timers_; }
  ChannelPool& channels() { return *channels_; }
  Membership& membership() { return membership_; }
  Caller& caller() { return *caller_; }
  absl::Duration default_timeout() const { return options_.default_timeout; }
  // `timeout`, or the default if unset; zero (none) as an infinite duration.
  absl::Duration ResolveTimeout(std::optional<absl::Duration> timeout) const;

 private:
  explicit RpcClient(RpcClientOptions options);
  absl::StatusOr<std::unique_ptr<MembershipBackend>> MakeBackend();
  absl::Duration Resolve(const CallOptions& options) const;
  // One unary Worker call to `worker` (by name or rank), bounded by
  // `timeout`: `call` makes it on the worker's stub. Errors: the worker
  // unknown or down, or the call's, named `what` (CallError).
  absl::Status CallWorker(const std::string& worker, const char* what,
                          absl::Duration timeout,
                          absl::FunctionRef<grpc::Status(proto::Worker::Stub&,
                                                         grpc::ClientContext*)>
                              call);

  const RpcClientOptions options_;
  std::shared_ptr<const Security> security_;
  Membership membership_;
  std::unique_ptr<Timers> owned_timers_;  // Unless options.timers is set.
  Timers* const timers_;
  std::unique_ptr<ChannelPool> channels_;
  std::unique_ptr<Caller> caller_;
  std::unique_ptr<MembershipBackend> backend_;
  // Whether backend_ keeps membership for this client.
  bool following_ = false;
  Directory directory_;
  uint64_t node_ = 0;
  std::string name_;
  // Set once by Close(); read by every calling thread.
  std::atomic<bool> closed_{false};
};

}  // namespace ferry

#endif  // FERRY_RPC_CLIENT_H_
