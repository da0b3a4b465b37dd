// What every etcd call and stream of one EtcdClient shares: a channel and
// stubs per endpoint, which endpoint is in use (and moving to the next when
// it fails), the auth token, the clock and timers, and the set of calls and
// streams in flight so Stop() can end them all. Internal to the client.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CONNECTION_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "rpc/base/clock.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"
#include "rpc/membership/etcd/etcd_options.h"

namespace ferry {

// One endpoint's channel and stubs.
struct EtcdStubs {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;
};

// A call or stream in flight that Stop() must end.
class EtcdTask {
 public:
  virtual ~EtcdTask() = default;
  // Ends the task soon; it then calls EtcdConnection::Untrack. Any thread;
  // never called under the connection's lock.
  virtual void Cancel() = 0;
};

class ContextCount;

class EtcdConnection : public std::enable_shared_from_this<EtcdConnection> {
 public:
  // Builds channels (no network traffic yet). INVALID_ARGUMENT for bad
  // endpoints or unreadable TLS files, naming them. Uses options.timers, or
  // runs its own if that is null.
  static absl::StatusOr<std::shared_ptr<EtcdConnection>> Create(
      const EtcdOptions& options);

  // ---- Constant after construction ----
  const EtcdOptions& options() const { return options_; }
  Clock* clock() const { return options_.clock; }
  Timers* timers() const { return timers_; }
  int size() const { return static_cast<int>(addresses_.size()); }
  const std::string& address(int i) const { return addresses_[i]; }
  // Only while a task is tracked (ReleaseChannels drops them after Stop).
  const EtcdStubs& stubs(int i) const { return *stubs_[i]; }
  // "a:1,b:2": every endpoint, for errors.
  const std::string& all_endpoints() const { return all_endpoints_; }
  bool authenticates() const { return !options_.user.empty(); }

  // ---- Endpoint in use ----
  int current() const ABSL_LOCKS_EXCLUDED(mu_);
  void SetCurrent(int i) ABSL_LOCKS_EXCLUDED(mu_);
  // Endpoint `failed` misbehaved: if it is still the one in use, the next
  // one is used from now on.
  void FailOver(int failed) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Authentication ----
  struct Token {
    std::string value;  // "" when not authenticated.
    uint64_t generation = 0;
  };
  Token token() const ABSL_LOCKS_EXCLUDED(mu_);
  // A new token (Authenticate on the endpoint in use), unless one newer
  // than `seen_generation` arrived meanwhile. Concurrent callers share one
  // attempt. UNAUTHENTICATED for bad credentials. If etcd has auth off, the
  // token becomes "" and this succeeds.
  Future<Done> RenewToken(uint64_t seen_generation, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A context for one call or stream. Every context must come from here:
  // the channels are released only once all of them are gone.
  std::shared_ptr<grpc::ClientContext> NewContext() const;

  // Sets the deadline (unless infinite) and the token metadata; streams
  // also require a leader, so etcd ends them when the member loses it.
  void Prepare(grpc::ClientContext* context, absl::Time deadline,
               const std::string& token, bool stream) const;

  // ---- Time ----
  absl::Time Now() const { return options_.clock->Now(); }
  // The pause before round `round` (0-based) of retries: the backoff
  // doubled `round` times, capped.
  absl::Duration Backoff(int round) const;

  // ---- Lifecycle ----
  // Tracks a task until Untrack; false (not tracked) once stopping.
  bool Track(std::shared_ptr<EtcdTask> task) ABSL_LOCKS_EXCLUDED(mu_);
  void Untrack(const EtcdTask* task) ABSL_LOCKS_EXCLUDED(mu_);
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);
  // Refuses new tasks, cancels tracked ones and waits up to `timeout` until
  // all were untracked. False if some were still running then.
  bool Stop(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the timers the connection runs itself (if any), after Stop():
  // later timers are dropped. Not from a timer callback.
  void StopOwnTimers();
  // After Stop(): waits up to `timeout` until every context is destroyed,
  // then destroys the channels here. If contexts remain, the channels are
  // leaked instead (see the .cc for why). Not from a gRPC callback.
  void ReleaseChannels(absl::Duration timeout);

 private:
  EtcdConnection(EtcdOptions options, std::unique_ptr<Timers> own_timers,
                 std::vector<std::unique_ptr<EtcdStubs>> stubs);
  void TokenRenewed(const absl::StatusOr<std::string>& token,
                    const Promise<Done>& done) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const EtcdOptions options_;
  // Destroyed with the connection, so streams and calls that outlive the
  // client never touch a destroyed Timers.
  const std::unique_ptr<Timers> own_timers_;
  Timers* const timers_;
  const std::vector<std::string> addresses_;
  const std::string all_endpoints_;
  // Counts the contexts alive; shared with their deleters.
  const std::shared_ptr<ContextCount> contexts_;
  // Constant until ReleaseChannels, which runs when no task is left.
  std::vector<std::unique_ptr<EtcdStubs>> stubs_;

  mutable absl::Mutex mu_;
  int current_ ABSL_GUARDED_BY(mu_) = 0;
  Token token_ ABSL_GUARDED_BY(mu_);
  // The renewal under way, if any.
  std::optional<Future<Done>> renewing_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<const EtcdTask*, std::shared_ptr<EtcdTask>> tasks_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CONNECTION_H_
