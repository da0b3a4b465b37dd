// The user side of the RRef protocol over gRPC: requests to owners
// (rref/owner_requests.h has the contract). One-shot requests (AddFork,
// Fetch, RenewLease, ListOwned) return futures that fail at once, naming
// the owner, when it dies. Control messages (ConfirmFork, DeleteFork) are
// idempotent and retried with backoff until delivered, the owner is known
// gone, or the retry budget is spent (about two minutes).
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
#include "rref/owner_requests.h"

namespace ferry {

class OwnerClient final : public OwnerRequests,
                          public std::enable_shared_from_this<OwnerClient> {
 public:
  // `directory` must be filled (the node started) before the first request.
  // Deadlines are on `timers`' clock.
  OwnerClient(ChannelPool* channels, Membership* membership, Timers* timers,
              const Directory* directory);

  // ---- OwnerRequests ----
  Future<Done> AddFork(int owner, proto::ForkRequest request,
                       absl::Duration timeout) override;
  Future<Value> Fetch(int owner, proto::ForkRequest request,
                      absl::Duration timeout,
                      std::shared_ptr<RRefCodec> codec) override;
  Future<LeaseAnswer> RenewLease(int owner, proto::LeaseRequest request,
                                 absl::Duration timeout) override;
  Future<std::vector<proto::OwnedRRef>> ListOwned(
      int owner, absl::Duration timeout) override;
  void Confirm(int owner, proto::ForkRequest request) override {
    Control(owner, false, std::move(request), 0);
  }
  void Delete(int owner, proto::ForkRequest request) override {
    Control(owner, true, std::move(request), 0);
  }
  int64_t pending() const override ABSL_LOCKS_EXCLUDED(mu_);
  // The wait itself is real; `deadline` is on the timers' clock.
  bool WaitIdle(absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_);
  void FailNode(uint64_t node, const absl::Status& reason) override {
    inflight_.FailNode(node, reason);
  }
  // Also waits (bounded) for gRPC's callbacks of what it cancels.
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

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
