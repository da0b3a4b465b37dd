// A process group: an ordered set of global ranks that run collectives
// together. Every member creates the group (with the same ranks, in the
// same order relative to its other group creations); non-members are not
// involved. Collectives address members by group rank (0..size-1).
//
// After a member was replaced (a new process for its rank), the group works
// again for the survivors and the newcomer (op_key.h, GroupState::NextOp):
// the newcomer makes the groups it is a member of in the same order as the
// process it replaces did (rerunning the same program does), and every
// member calls the next collective once it saw the replacement — one
// started before fails at once (UNAVAILABLE naming the rank), and may be
// retried.
#ifndef FERRY_COLLECTIVES_OP_PROCESS_GROUP_H_
#define FERRY_COLLECTIVES_OP_PROCESS_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry {

class CollectiveContext;
namespace collectives_internal {
class GroupState;
}  // namespace collectives_internal

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  // Made by Worker::NewGroup (and elastic.h's Shrink and Grow); `pinned`
  // and `origin` are group_state.h's.
  ProcessGroup(CollectiveContext* context, std::string name,
               std::vector<int> members, int rank, bool pinned = false,
               std::vector<int> origin = {});
  ~ProcessGroup();

  // This worker's rank in the group.
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  // The global ranks of the group's ranks: members()[r] is group rank r's.
  const std::vector<int>& members() const { return members_; }
  // Unique within the job: "world", or "g0,2#1" (the 2nd group of ranks 0, 2).
  const std::string& name() const { return name_; }

  // What ferry's collectives keep for the group (group_state.h: its op
  // numbering, generations, point-to-point bookkeeping); not for users.
  collectives_internal::GroupState& state() const { return *state_; }

 private:
  const std::string name_;
  const std::vector<int> members_;
  const int rank_;
  // Behind a pointer: ferry.h shows the group, not its bookkeeping.
  const std::unique_ptr<collectives_internal::GroupState> state_;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_PROCESS_GROUP_H_
