#include "rpc/peer_budget.h"

#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"

namespace ferry {

absl::Status PeerBudget::PeerOver(const std::string& peer, int64_t held,
                                  int64_t n) const {
  const int64_t max = options_.max_bytes_per_peer;
  return OverLimit(
      absl::StrCat(peer, " would hold ", HumanBytes(held + n), " of ",
                   options_.what, " here (", HumanBytes(held), " held, ",
                   HumanBytes(n), " more)"),
      HumanBytes(max), options_.peer_flag, max / Limits::kMiB);
}

absl::Status PeerBudget::TotalOver(int64_t held, int64_t n) const {
  const int64_t max = options_.max_bytes;
  return OverLimit(
      absl::StrCat(HumanBytes(n), " more for ", options_.what, " while ",
                   HumanBytes(held), " are held for them"),
      HumanBytes(max), options_.total_flag, max / Limits::kMiB);
}

absl::Status PeerBudget::Take(const std::string& peer, int64_t n) {
  absl::MutexLock lock(&mu_);
  auto it = by_peer_.find(peer);
  const int64_t held = it == by_peer_.end() ? 0 : it->second;
  // Compared by subtraction: `n` is bounded by the caller, the sums need
  // not be.
  if (n > options_.max_bytes_per_peer - held) return PeerOver(peer, held, n);
  if (n > options_.max_bytes - used_) return TotalOver(used_, n);
  used_ += n;
  if (it == by_peer_.end()) {
    if (n > 0) by_peer_.emplace(peer, n);
  } else {
    it->second += n;
  }
  return absl::OkStatus();
}

void PeerBudget::Give(const std::string& peer, int64_t n) {
  absl::MutexLock lock(&mu_);
  used_ -= n;
  auto it = by_peer_.find(peer);
  if (it == by_peer_.end()) return;
  it->second -= n;
  if (it->second <= 0) by_peer_.erase(it);
}

absl::Status PeerBudget::CheckFits(int64_t bytes) const {
  const std::string what = absl::StrCat("a message of ", HumanBytes(bytes),
                                        " among ", options_.what);
  if (bytes > options_.max_bytes_per_peer) {
    return OverLimit(what, HumanBytes(options_.max_bytes_per_peer),
                     options_.peer_flag,
                     options_.max_bytes_per_peer / Limits::kMiB);
  }
  if (bytes > options_.max_bytes) {
    return OverLimit(what, HumanBytes(options_.max_bytes), options_.total_flag,
                     options_.max_bytes / Limits::kMiB);
  }
  return absl::OkStatus();
}

int64_t PeerBudget::used() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

int64_t PeerBudget::used_by(const std::string& peer) const {
  absl::MutexLock lock(&mu_);
  auto it = by_peer_.find(peer);
  return it == by_peer_.end() ? 0 : it->second;
}

size_t PeerBudget::peers() const {
  absl::MutexLock lock(&mu_);
  return by_peer_.size();
}

}  // namespace ferry
