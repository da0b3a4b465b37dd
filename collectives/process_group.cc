#include "collectives/process_group.h"

#include "collectives/collective_context.h"

namespace ferry {

ProcessGroup::OpNumber ProcessGroup::Next(bool agreement) {
  // Read outside the lock: the directory is the context's, lock-free.
  const uint64_t epoch = context_->Epoch(members_);
  absl::MutexLock lock(&mu_);
  OpNumber& next = agreement ? next_agreement_ : next_;
  if (epoch > next.epoch) next = OpNumber{epoch, 0};
  return OpNumber{next.epoch, next.sequence++};
}

ProcessGroup::OpNumber ProcessGroup::NextOp() { return Next(false); }

ProcessGroup::OpNumber ProcessGroup::NextAgreement() { return Next(true); }

}  // namespace ferry
