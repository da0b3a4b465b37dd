// What ferry's collectives keep for a process group beyond what its user
// sees (process_group.h): the worker's collective context, the numbering of
// its ops and agreements, the members' generations as the group knew them,
// whether it is pinned to them, the group it was shrunk from, and its
// point-to-point bookkeeping. Reached as `group.state()`; not part of
// ferry.h.
#ifndef FERRY_COLLECTIVES_OP_GROUP_STATE_H_
#define FERRY_COLLECTIVES_OP_GROUP_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

class CollectiveContext;
class P2pBook;

namespace collectives_internal {

class GroupState {
 public:
  // Notes the `members`' incarnations now (generations()). A `pinned`
  // group (Shrink's, elastic.h) holds those incarnations only: once a
  // member was replaced, its ops fail at once (ReplacedMember) instead of
  // waiting for a newcomer that takes no part in them. `origin`: the
  // members of the group it was shrunk from (empty: `members`).
  GroupState(CollectiveContext* context, std::vector<int> members, bool pinned,
             std::vector<int> origin);
  ~GroupState();

  CollectiveContext& context() const { return *context_; }

  // The identity of the next op called on this group (SPMD: every member
  // calls the same collectives in the same order): the group's membership
  // epoch now (op_key.h) and the op's number within it, from 0 in each new
  // epoch — so after a member was replaced, the survivors and the newcomer
  // count alike. (An epoch older than one already used — a thread that
  // read the directory before a replacement — counts on in the newer.)
  struct OpNumber {
    uint64_t epoch = 0;
    uint64_t sequence = 0;
  };
  OpNumber NextOp() ABSL_LOCKS_EXCLUDED(mu_);
  // The identity of the group's next agreement (elastic.h), counted apart
  // from its ops: after a death or a revoke, members may have begun
  // different numbers of ops, but they agree and shrink in the same order.
  // Not named by the membership epoch, which members learn at different
  // moments (one that saw a replacement, one not yet), but by an era
  // (`epoch` here) that only StartAgreementEra changes: Grow does, on every
  // member at one point of its program, the newcomers included.
  OpNumber NextAgreement() ABSL_LOCKS_EXCLUDED(mu_);
  void StartAgreementEra(uint64_t era) ABSL_LOCKS_EXCLUDED(mu_);

  // The generation (directory.h) of each member, by group rank, as this
  // group knew them: when it was made, or last grew (RefreshGenerations).
  // A member replaced since is gone for the group's agreements: its new
  // incarnation takes no part in them until the group grows.
  std::vector<uint64_t> generations() const ABSL_LOCKS_EXCLUDED(mu_);
  void RefreshGenerations() ABSL_LOCKS_EXCLUDED(mu_);
  // The group rank of a member replaced since the group knew it, if any.
  std::optional<int> ReplacedMember() const ABSL_LOCKS_EXCLUDED(mu_);

  bool pinned() const { return pinned_; }
  // The members of the group this one was shrunk from (through any number
  // of Shrinks), in their order; its own members if it was not: what
  // elastic.h's Grow restores.
  const std::vector<int>& origin() const { return origin_; }

  // This rank's point-to-point bookkeeping in the group (p2p.h).
  P2pBook& p2p() { return *p2p_; }

 private:
  CollectiveContext* const context_;
  const std::vector<int> members_;
  const bool pinned_;
  const std::vector<int> origin_;
  mutable absl::Mutex mu_;
  OpNumber next_ ABSL_GUARDED_BY(mu_);
  OpNumber next_agreement_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> generations_ ABSL_GUARDED_BY(mu_);
  const std::unique_ptr<P2pBook> p2p_;
};

}  // namespace collectives_internal
}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_GROUP_STATE_H_
