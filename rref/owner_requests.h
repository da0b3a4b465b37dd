// The user side's seam to owners: the requests an RRef context sends the
// owners of the copies it holds, as an interface. OwnerClient
// (rref/owner_client.h) sends them over gRPC; a test hands them to
// in-process owners instead (tests/testing/fake_owners.h), stepping every
// message and the clock by hand.
//
// The contract every implementation keeps (the protocol relies on it):
//   - one-shot requests (AddFork, Fetch, RenewLease, ListOwned) return a
//     future that fails by `timeout`, and at once with UNAVAILABLE "owner
//     <name> died (…)" once the owner is known gone (FailNode, membership);
//   - control messages (Confirm, Delete) are idempotent, sent until
//     delivered, the owner is known gone, or a retry budget is spent, and
//     counted by pending() until then;
//   - after Stop() nothing is sent and no callback runs.
#ifndef FERRY_RREF_OWNER_REQUESTS_H_
#define FERRY_RREF_OWNER_REQUESTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/rref.pb.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"

namespace ferry {

// The request about fork `fork` of rref `rref`, held (or to be held) by
// node `holder`: what AddFork, Fetch, Confirm and Delete carry.
inline proto::ForkRequest ForkRequestFor(GlobalId rref, GlobalId fork,
                                         uint64_t holder) {
  proto::ForkRequest r;
  r.set_rref_creator(rref.node);
  r.set_rref_local(rref.local);
  r.set_fork_creator(fork.node);
  r.set_fork_local(fork.local);
  r.set_holder(holder);
  return r;
}

// What an owner answers a lease renewal.
struct LeaseAnswer {
  absl::Duration lease;  // How often it must hear from us.
  uint64_t epoch = 0;    // Its abandon epoch (proto/rref.proto).
};

class OwnerRequests {
 public:
  virtual ~OwnerRequests() = default;

  // Registers a fork (a copy this node passes on) with worker `owner`.
  virtual Future<Done> AddFork(int owner, proto::ForkRequest request,
                               absl::Duration timeout) = 0;
  // The value, decoded with `codec` (RRefs inside it become this node's).
  virtual Future<Value> Fetch(int owner, proto::ForkRequest request,
                              absl::Duration timeout,
                              std::shared_ptr<RRefCodec> codec) = 0;
  // One chunk of a renewal (rref/lease_chunks.h).
  virtual Future<LeaseAnswer> RenewLease(int owner, proto::LeaseRequest request,
                                         absl::Duration timeout) = 0;
  virtual Future<std::vector<proto::OwnedRRef>> ListOwned(
      int owner, absl::Duration timeout) = 0;

  // Control messages: the holder confirms a copy it received, or deletes
  // one it let go.
  virtual void Confirm(int owner, proto::ForkRequest request) = 0;
  virtual void Delete(int owner, proto::ForkRequest request) = 0;

  // Control messages not yet delivered.
  virtual int64_t pending() const = 0;
  // True once every control message was delivered (or dropped); false at
  // `deadline` (on the node's clock).
  virtual bool WaitIdle(absl::Time deadline) = 0;
  // Fails every request in flight to `node` with `reason`.
  virtual void FailNode(uint64_t node, const absl::Status& reason) = 0;
  // Cancels everything and drops what is not delivered. Call before
  // destroying the implementation.
  virtual void Stop() = 0;
};

}  // namespace ferry

#endif  // FERRY_RREF_OWNER_REQUESTS_H_
