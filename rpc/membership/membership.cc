#include "rpc/membership/membership.h"

#include <utility>

#include "rpc/membership/directory.h"

namespace ferry {

void Membership::AddListener(Listener listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(std::move(listener));
}

bool Membership::MarkDown(uint64_t node, absl::Status reason) {
  std::vector<Listener> listeners;
  {
    absl::MutexLock lock(&mu_);
    if (!down_.emplace(node, reason).second) return false;
    down_count_.fetch_add(1);
    if (!IsWorkerNode(node)) {
      down_clients_.push_back(node);
      if (down_clients_.size() > kClientMemory) {
        down_.erase(down_clients_.front());
        down_clients_.pop_front();
        down_count_.fetch_sub(1);
      }
    }
    listeners = listeners_;
  }
  for (const Listener& l : listeners) l(node, reason);
  return true;
}

bool Membership::Revive(uint64_t node) {
  if (!IsWorkerNode(node)) return false;
  absl::MutexLock lock(&mu_);
  if (down_.erase(node) == 0) return false;
  down_count_.fetch_sub(1);
  return true;
}

std::optional<absl::Status> Membership::DownReason(uint64_t node) const {
  if (down_count_.load() == 0) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = down_.find(node);
  if (it == down_.end()) return std::nullopt;
  return it->second;
}

std::vector<uint64_t> Membership::DownNodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (const auto& [node, reason] : down_) out.push_back(node);
  return out;
}

}  // namespace ferry
