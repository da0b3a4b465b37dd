// Outgoing calls to workers: rpc_async over the gRPC callback API, with
// every in-flight call tracked per peer so a peer's death fails them all at
// once, with its name.
#ifndef FERRY_RPC_CALLER_H_
#define FERRY_RPC_CALLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/channels.h"
#include "rpc/directory.h"
#include "rpc/future.h"
#include "rpc/value.h"
#include "rpc/value_proto.h"

namespace ferry {

// Who is calling: a worker (node = rank) or a client.
struct CallerIdentity {
  uint64_t node = 0;
  std::string name;
};

// Options of one call through an agent or client.
struct CallOptions {
  // Unset: the default timeout; 0: no timeout.
  std::optional<absl::Duration> timeout;
  // Encodes RRefs in the arguments / decodes them in the result.
  RRefCodec* codec = nullptr;
};

class Caller {
 public:
  Caller(ChannelPool* channels, Membership* membership, CallerIdentity self);
  ~Caller();

  Caller(const Caller&) = delete;
  Caller& operator=(const Caller&) = delete;

  // Runs `function(args…)` on `to`. `timeout` becomes the gRPC deadline
  // (absl::InfiniteDuration() = none). Errors:
  //   the function's own:  "<to>: <function>: <its message>", its code;
  //   peer gone:           UNAVAILABLE "<to>: <function>: <to> died: …";
  //   timeout:             DEADLINE_EXCEEDED "<to>: <function>: no reply within
  //   N ms".
  // `codec` (may be null) encodes RRefs in `args` and decodes the result's;
  // it must outlive the returned future's completion.
  Future<Value> Call(const WorkerInfo& to, const std::string& function,
                     std::vector<Value> args, absl::Duration timeout,
                     RRefCodec* codec = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Fails every in-flight call to `node` with `reason` (cancelling it).
  void FailNode(uint64_t node, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t inflight() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until no call is in flight or `deadline` passes; true if idle.
  bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels everything in flight (abrupt stop).
  void CancelAll(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);

  const CallerIdentity& self() const { return self_; }

 private:
  struct Pending;

  void Complete(const std::shared_ptr<Pending>& call,
                const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  ChannelPool* const channels_;
  Membership* const membership_;
  const CallerIdentity self_;

  mutable absl::Mutex mu_;
  // Keyed by the call; the value is the callee's node.
  absl::flat_hash_map<Pending*, std::shared_ptr<Pending>> inflight_
      ABSL_GUARDED_BY(mu_);
};

// Prefixes a transport-level failure of a call with "<peer>: <function>: "
// unless the peer already named itself (errors produced by the callee).
absl::Status CallError(const std::string& peer, const std::string& function,
                       const absl::Status& status, absl::Duration timeout);

}  // namespace ferry

#endif  // FERRY_RPC_CALLER_H_
