#include "rpc/base/cancellation.h"

#include <utility>

namespace ferry {

Cancellation::Id Cancellation::OnCancel(Callback cb) {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_.load()) {
      Id id = next_++;
      callbacks_.emplace(id, std::move(cb));
      return id;
    }
  }
  std::move(cb)();
  return 0;
}

bool Cancellation::Remove(Id id) {
  absl::MutexLock lock(&mu_);
  return callbacks_.erase(id) > 0;
}

bool Cancellation::Cancel(const absl::Status& reason) {
  std::map<Id, Callback> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.load()) return false;
    reason_ = reason.ok() ? absl::CancelledError("cancelled") : reason;
    cancelled_.store(true);
    callbacks.swap(callbacks_);
  }
  // Outside the lock: a callback may Remove() or register others.
  for (auto& [id, cb] : callbacks) std::move(cb)();
  return true;
}

absl::Status Cancellation::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

}  // namespace ferry
