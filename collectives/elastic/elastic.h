// Survivors go on: ULFM's answers to a member's death, on ferry's
// membership (MPIX_Comm_agree, MPIX_Comm_shrink, MPIX_Comm_revoke).
//
//   absl::StatusOr<Tensor> sum = AllReduce(world, grads);    // rank 3 died
//   if (absl::IsUnavailable(sum.status()) || absl::IsAborted(sum.status())) {
//     FERRY_RETURN_IF_ERROR(Revoke(world, "rank 3 died in step 17"));
//     FERRY_ASSIGN_OR_RETURN(auto live, Shrink(world));   // ranks 0, 1, 2
//     …                                      // go on with *live
//   }
//
// Agree is a fault-tolerant AND among the members that take part: every
// member sends its flag to every other, and waits until each member voted
// or is known gone (the membership says so). Members that saw different
// votes (a member died while sending its vote) propose different results;
// the job's store (the master's, or etcd: membership_backend.h's
// OpenStore) keeps the first proposal for the agreement and every member
// takes that one — so every member that returns gets the same result, even
// while further members die. A member alive and silent is waited for until
// the deadline (DEADLINE_EXCEEDED naming it): agreement needs the others'
// death, not their slowness, to go on without them.
//
// Agree and Shrink are ops of the group like any collective: every live
// member calls them, in the same order as its other ops on the group (an
// agreement takes the group's next sequence number, or the caller's tag).
// They work on a revoked group; no other op does.
#ifndef FERRY_COLLECTIVES_ELASTIC_ELASTIC_H_
#define FERRY_COLLECTIVES_ELASTIC_ELASTIC_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/op/options.h"
#include "collectives/op/process_group.h"
#include "rpc/base/future.h"

namespace ferry {

class CollectiveContext;

struct Agreement {
  // The AND of the flags of the members that took part.
  bool flag = true;
  // The global ranks of the members that took part, in group order.
  std::vector<int> members;
  // The agreement's name (an op key of the group), the same everywhere.
  std::string id;
};

// Agreement on `flag` among the group's live members (above). Errors:
// DEADLINE_EXCEEDED naming the members that neither voted nor are known
// gone; UNAVAILABLE if the job's store cannot be reached (the master is
// gone) or this worker stops; FAILED_PRECONDITION if the decided result
// leaves this worker out (the others counted it gone).
Future<Agreement> AgreeAsync(ProcessGroup& group, bool flag,
                             const CollectiveOptions& options = {});
absl::StatusOr<Agreement> Agree(ProcessGroup& group, bool flag,
                                const CollectiveOptions& options = {});

// A new group of `group`'s live members (agreed, as Agree), ranked densely
// in their old order; nobody else is re-initialised. It is pinned to the
// incarnations agreed (process_group.h): once a member is replaced, its
// ops fail at once (UNAVAILABLE) rather than wait for a newcomer that is
// in Grow. Named from the agreement ("g<ranks>#<n>", n ≥ 2^40), alike on
// every member whatever groups each made before. Errors as Agree.
absl::StatusOr<std::shared_ptr<ProcessGroup>> Shrink(
    ProcessGroup& group, const CollectiveOptions& options = {});

// The group `group` was shrunk from (its origin(), process_group.h) again,
// once all of its ranks are live (replacements took the dead ranks'
// places): waits for that (DEADLINE_EXCEEDED naming the ranks still gone),
// then agrees among them — each calls Grow: the survivors with the group
// they shrank to, a replacement with a group of the origin's ranks (its
// world, or NewGroup of them) — and returns the successor: the world
// itself if the origin is the world, which works again in its new
// membership epoch (op_key.h), a revocation of an earlier epoch included;
// else a new group of the origin's ranks named alike on every member.
// UNAVAILABLE naming the ranks that died meanwhile (shrink again).
absl::StatusOr<std::shared_ptr<ProcessGroup>> Grow(
    ProcessGroup& group, const CollectiveOptions& options = {});

// Revokes `group` on every member: each pending and future op of the group
// fails at once (ABORTED: "group G was revoked by workerR (rank r):
// reason"); only Agree and Shrink work on it from then on. Returns once
// revoked here, with the others told (each member that hears of it tells
// the rest, so the revoker's death while telling stops nobody's news).
// INVALID_ARGUMENT for a reason over 256 bytes.
absl::Status Revoke(ProcessGroup& group, const std::string& reason);

// The functions peers call for the above ("ferry.agree_vote",
// "ferry.revoke_group"), on this worker.
absl::Status RegisterElasticFunctions(
    std::shared_ptr<CollectiveContext> context);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ELASTIC_ELASTIC_H_
