#include "rpc/membership/etcd/callback_gate.h"

#include <algorithm>

namespace ferry {

bool CallbackGate::Enter() {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  inside_.push_back(std::this_thread::get_id());
  return true;
}

void CallbackGate::Exit() {
  absl::MutexLock lock(&mu_);
  auto it =
      std::find(inside_.begin(), inside_.end(), std::this_thread::get_id());
  if (it != inside_.end()) inside_.erase(it);
}

bool CallbackGate::Close(absl::Duration timeout) {
  const std::thread::id self = std::this_thread::get_id();
  absl::MutexLock lock(&mu_);
  closed_ = true;
  // A callback that closes its own gate must not wait for itself.
  auto only_self_inside = [this, self]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(inside_.begin(), inside_.end(),
                       [self](std::thread::id t) { return t == self; });
  };
  return mu_.AwaitWithTimeout(absl::Condition(&only_self_inside), timeout);
}

}  // namespace ferry
