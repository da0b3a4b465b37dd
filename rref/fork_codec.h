// How RRefs inside call values cross the wire (rpc/value/value_proto.h's
// RRefCodec), for one call with one peer:
//
//   send to the owner:      lent ("borrowed"): the sender's own confirmed
//                           copy is kept alive for the call; no new fork.
//                           The owner takes a lent copy only from a node
//                           holding one (PERMISSION_DENIED otherwise).
//   send from the owner:    a fork registered in the local owner table.
//   send user → user:       a fork registered with the owner (AddFork)
//                           before the message leaves (ReadyToSend), so it
//                           arrives already known to the owner; the
//                           sender's copy is pinned until the AddFork is
//                           acknowledged (G2).
//   in transit:             forks registered here are vouched for in every
//                           lease renewal until the call ends.
//   receive:                on the owner, the fork is confirmed locally;
//                           elsewhere a copy is adopted and confirmed
//                           asynchronously.
//   not delivered:          forks never confirmed are released (Abandon);
//                           the owner waits for the receiver's word first.
#ifndef FERRY_RREF_FORK_CODEC_H_
#define FERRY_RREF_FORK_CODEC_H_

#include <memory>
#include <vector>

#include "rpc/value/value_proto.h"
#include "rref/rref_context.h"

namespace ferry {

class ForkCodec final : public RRefCodec {
 public:
  ForkCodec(std::shared_ptr<RRefContext> context, uint64_t peer);
  ~ForkCodec() override;

  absl::StatusOr<proto::RRefHandle> Encode(const Value::RRefPtr& rref) override;
  absl::StatusOr<Value::RRefPtr> Decode(
      const proto::RRefHandle& handle) override;
  Future<Done> ReadyToSend() override { return WhenAll(std::move(adds_)); }
  void Abandon() override;

 private:
  struct Registered {
    GlobalId rref;
    GlobalId fork;
    int owner;
  };

  absl::StatusOr<Value::RRefPtr> DecodeOnOwner(const proto::RRefHandle& handle);
  // Registers a fork in this owner's table (the entry must exist).
  absl::Status AddLocalFork(GlobalId rref, GlobalId fork, uint64_t holder);
  // Registers a fork of `state`, an RRef this node owns whose remote() is
  // still on its way here, once its entry exists: the future is settled
  // then, or with the creation's error, or DEADLINE_EXCEEDED at the
  // context's timeout.
  Future<Done> AddLocalForkWhenCreated(
      const std::shared_ptr<const RRefState>& state, GlobalId fork);

  const std::shared_ptr<RRefContext> context_;
  const uint64_t peer_;
  std::vector<Future<Done>> adds_;
  std::vector<Registered> registered_;
  std::vector<std::shared_ptr<const RRefState>> lent_;
};

}  // namespace ferry

#endif  // FERRY_RREF_FORK_CODEC_H_
