#include "collectives/op/group_state.h"

#include <memory>
#include <utility>

#include "collectives/op/collective_context.h"
#include "collectives/op/p2p_book.h"

namespace ferry {
namespace collectives_internal {

GroupState::GroupState(CollectiveContext* context, std::vector<int> members,
                       bool pinned, std::vector<int> origin)
    : context_(context),
      members_(std::move(members)),
      pinned_(pinned),
      origin_(origin.empty() ? members_ : std::move(origin)),
      generations_(context_->Generations(members_)),
      p2p_(std::make_unique<P2pBook>()) {}

GroupState::~GroupState() = default;

std::optional<int> GroupState::ReplacedMember() const {
  const std::vector<uint64_t> now = context_->Generations(members_);
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] != generations_[i]) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::vector<uint64_t> GroupState::generations() const {
  absl::MutexLock lock(&mu_);
  return generations_;
}

void GroupState::RefreshGenerations() {
  std::vector<uint64_t> now = context_->Generations(members_);
  absl::MutexLock lock(&mu_);
  generations_ = std::move(now);
}

GroupState::OpNumber GroupState::NextOp() {
  // Read outside the lock: the directory is the context's, lock-free.
  const uint64_t epoch = context_->Epoch(members_);
  absl::MutexLock lock(&mu_);
  if (epoch > next_.epoch) next_ = OpNumber{epoch, 0};
  return OpNumber{next_.epoch, next_.sequence++};
}

GroupState::OpNumber GroupState::NextAgreement() {
  absl::MutexLock lock(&mu_);
  return OpNumber{next_agreement_.epoch, next_agreement_.sequence++};
}

void GroupState::StartAgreementEra(uint64_t era) {
  absl::MutexLock lock(&mu_);
  next_agreement_ = OpNumber{era, 0};
}

}  // namespace collectives_internal
}  // namespace ferry
