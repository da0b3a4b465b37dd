#include "collectives/op/process_group.h"

#include <memory>
#include <utility>

#include "collectives/op/group_state.h"

namespace ferry {

ProcessGroup::ProcessGroup(CollectiveContext* context, std::string name,
                           std::vector<int> members, int rank, bool pinned,
                           std::vector<int> origin)
    : name_(std::move(name)),
      members_(std::move(members)),
      rank_(rank),
      state_(std::make_unique<collectives_internal::GroupState>(
          context, members_, pinned, std::move(origin))) {}

ProcessGroup::~ProcessGroup() = default;

}  // namespace ferry
