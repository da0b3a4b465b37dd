// The user side of the RRef protocol: requests to owners. One-shot
// requests (AddFork, Fetch, RenewLease, ListOwned) return futures that fail
// at once, naming the owner, when it dies. Control messages (ConfirmFork,
// DeleteFork) are idempotent and retried with backoff until delivered, the
// owner is known gone, or the retry budget is spent.
#ifndef FERRY_RREF_OWNER_CLIENT_H_
#define FERRY_RREF_OWNER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/rref.grpc.pb.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"
#include "rpc/channels.h"
#include "rpc/inflight.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"

namespace ferry {

// What an owner answers a lease renewal.
struct LeaseAnswer {
  absl::Duration lease;  // How often it must hear from us.
  uint64_t epoch = 0;    // Its abandon epoch (proto/rref.proto).
};

class OwnerClient : public std::enable_shared_from_this<OwnerClient> {
 public:
  // `directory` must be filled (the node started) before the first request.
  // Deadlines are on `timers`' clock.
  OwnerClient(ChannelPool* channels, Membership* membership, Timers* timers,
              const Directory* directory);

  Future<Done> AddFork(int owner, proto::ForkRequest request,
                       absl::Duration timeout);
  // The value, decoded with `codec` (RRefs inside it become this node's).
  Future<Value> Fetch(int owner, proto::ForkRequest request,
                      absl::Duration timeout, std::shared_ptr<RRefCodec> codec);
  // One chunk of a renewal (rref/lease_chunks.h).
  Future<LeaseAnswer> RenewLease(int owner, proto::LeaseRequest request,
                                 absl::Duration timeout);
  Future<std::vector<proto::OwnedRRef>> ListOwned(int owner,
                                                  absl::Duration timeout);

  void Confirm(int owner, proto::ForkRequest request) {
    Control(owner, false, std::move(request), 0);
  }
  void Delete(int owner, proto::ForkRequest request) {
    Control(owner, true, std::move(request), 0);
  }

  // Control messages not yet delivered.
  int64_t pending() const ABSL_LOCKS_EXCLUDED(mu_);
  // True once every control message was delivered (or dropped); false at
  // `deadline` (on the timers' clock; the wait itself is real).
  bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void FailNode(uint64_t node, const absl::Status& reason) {
    inflight_.FailNode(node, reason);
  }
  // Cancels everything and waits (bounded) for the callbacks; later
  // retries are dropped. Call before destroying the client.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  template <typename Response, typename Start>
  Future<Response> Unary(int owner, const std::string& what,
                         absl::Duration timeout, Start start);
  void Control(int owner, bool is_delete, proto::ForkRequest request,
               int attempt);
  absl::Status OwnerError(int owner, const std::string& what,
                          const absl::Status& status) const;
  proto::RRefs::Stub* StubFor(int owner) ABSL_LOCKS_EXCLUDED(mu_);
  // True if `owner` is a rank of the directory (so it may index it).
  bool Known(int owner) const;

  ChannelPool* const channels_;
  Membership* const membership_;
  Timers* const timers_;
  const Directory* const directory_;
  InflightCalls inflight_;

  mutable absl::Mutex mu_;
  struct Stub {
    uint64_t generation = 0;  // Of the owner's incarnation it reaches.
    std::unique_ptr<proto::RRefs::Stub> stub;
  };
  absl::flat_hash_map<int, Stub> stubs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<proto::RRefs::Stub>> retired_
      ABSL_GUARDED_BY(mu_);
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RREF_OWNER_CLIENT_H_
