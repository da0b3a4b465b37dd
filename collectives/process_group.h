// A process group: an ordered set of global ranks that run collectives
// together. Every member creates the group (with the same ranks, in the
// same order relative to its other group creations); non-members are not
// involved. Collectives address members by group rank (0..size-1).
#ifndef FERRY_COLLECTIVES_PROCESS_GROUP_H_
#define FERRY_COLLECTIVES_PROCESS_GROUP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ferry {

class CollectiveContext;

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  ProcessGroup(CollectiveContext* context, std::string name,
               std::vector<int> members, int rank)
      : context_(context),
        name_(std::move(name)),
        members_(std::move(members)),
        rank_(rank) {}

  // This worker's rank in the group.
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  // The global rank of group rank `r`.
  int global(int r) const { return members_[r]; }
  const std::vector<int>& members() const { return members_; }
  // Unique within the job: "world", or "g0,2#1" (the 2nd group of ranks 0, 2).
  const std::string& name() const { return name_; }
  CollectiveContext& context() const { return *context_; }

  // The sequence number of the next op called on this group (SPMD: every
  // member calls the same collectives in the same order).
  uint64_t NextSequence() { return next_.fetch_add(1); }

 private:
  CollectiveContext* const context_;
  const std::string name_;
  const std::vector<int> members_;
  const int rank_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_PROCESS_GROUP_H_
