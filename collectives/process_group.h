// A process group: an ordered set of global ranks that run collectives
// together. Every member creates the group (with the same ranks, in the
// same order relative to its other group creations); non-members are not
// involved. Collectives address members by group rank (0..size-1).
//
// After a member was replaced (a new process for its rank), the group works
// again for the survivors and the newcomer (op_key.h, NextOp): the newcomer
// makes the groups it is a member of in the same order as the process it
// replaces did (rerunning the same program does), and every member calls
// the next collective once it saw the replacement — one started before
// fails at once (UNAVAILABLE naming the rank), and may be retried.
#ifndef FERRY_COLLECTIVES_PROCESS_GROUP_H_
#define FERRY_COLLECTIVES_PROCESS_GROUP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

class CollectiveContext;
class P2pBook;

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  // Notes the members' incarnations now (generations()). A `pinned` group
  // (Shrink's, elastic.h) holds those incarnations only: once a member was
  // replaced, its ops fail at once (ReplacedMember) instead of waiting for
  // a newcomer that takes no part in them. `origin`: the members of the
  // group it was shrunk from (empty: `members`).
  ProcessGroup(CollectiveContext* context, std::string name,
               std::vector<int> members, int rank, bool pinned = false,
               std::vector<int> origin = {});
  ~ProcessGroup();

  // This worker's rank in the group.
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  // The global rank of group rank `r`.
  int global(int r) const { return members_[r]; }
  const std::vector<int>& members() const { return members_; }
  // Unique within the job: "world", or "g0,2#1" (the 2nd group of ranks 0, 2).
  const std::string& name() const { return name_; }
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
  bool pinned() const { return pinned_; }
  // The members of the group this one was shrunk from (through any number
  // of Shrinks), in their order; its own members if it was not: what
  // elastic.h's Grow restores.
  const std::vector<int>& origin() const { return origin_; }
  // The group rank of a member replaced since the group knew it, if any.
  std::optional<int> ReplacedMember() const ABSL_LOCKS_EXCLUDED(mu_);

  // This rank's point-to-point bookkeeping in the group (p2p.h).
  P2pBook& p2p() { return *p2p_; }

 private:
  CollectiveContext* const context_;
  const std::string name_;
  const std::vector<int> members_;
  const int rank_;
  const bool pinned_;
  const std::vector<int> origin_;
  mutable absl::Mutex mu_;
  OpNumber next_ ABSL_GUARDED_BY(mu_);
  OpNumber next_agreement_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> generations_ ABSL_GUARDED_BY(mu_);
  // Behind a pointer: ferry.h shows ProcessGroup, not the bookkeeping.
  const std::unique_ptr<P2pBook> p2p_;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_PROCESS_GROUP_H_
