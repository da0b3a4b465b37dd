#include "collectives/process_group.h"

#include "collectives/collective_context.h"

namespace ferry {

ProcessGroup::OpNumber ProcessGroup::NextOp() {
  // Read outside the lock: the directory is the context's, lock-free.
  const uint64_t epoch = context_->Epoch(members_);
  absl::MutexLock lock(&mu_);
  if (epoch > next_.epoch) next_ = OpNumber{epoch, 0};
  return OpNumber{next_.epoch, next_.sequence++};
}

}  // namespace ferry
