#include "rpc/peer_budget.h"

#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"

namespace ferry {

std::string PeerBudget::Amount(int64_t n) const {
  return options_.unit.empty() ? HumanBytes(n)
                               : absl::StrCat(n, " ", options_.unit);
}

int64_t PeerBudget::FlagValue(int64_t max) const {
  return options_.unit.empty() ? max / Limits::kMiB : max;
}

absl::Status PeerBudget::PeerOver(const std::string& peer, int64_t held,
                                  int64_t n) const {
  const int64_t max = options_.max_bytes_per_peer;
  const std::string what =
      options_.unit.empty()
          ? absl::StrCat(peer, " would hold ", HumanBytes(held + n), " of ",
                         options_.what, " here (", HumanBytes(held), " held, ",
                         HumanBytes(n), " more)")
          : absl::StrCat(peer, " would have ", held + n, " ", options_.what,
                         " here");
  return OverLimit(what, Amount(max), options_.peer_flag, FlagValue(max));
}

absl::Status PeerBudget::TotalOver(int64_t held, int64_t n) const {
  const int64_t max = options_.max_bytes;
  const std::string what =
      options_.unit.empty()
          ? absl::StrCat(HumanBytes(n), " more for ", options_.what, " while ",
                         HumanBytes(held), " are held for them")
          : absl::StrCat(held, " ", options_.what, " here");
  return OverLimit(what, Amount(max), options_.total_flag, FlagValue(max));
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
  const std::string what =
      absl::StrCat("a message of ", Amount(bytes), " among ", options_.what);
  if (bytes > options_.max_bytes_per_peer) {
    return OverLimit(what, Amount(options_.max_bytes_per_peer),
                     options_.peer_flag,
                     FlagValue(options_.max_bytes_per_peer));
  }
  if (bytes > options_.max_bytes) {
    return OverLimit(what, Amount(options_.max_bytes), options_.total_flag,
                     FlagValue(options_.max_bytes));
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

std::shared_ptr<PeerBudget> OpenStreamsBudget(const Limits& limits) {
  return std::make_shared<PeerBudget>(PeerBudget::Options{
      .max_bytes = limits.max_open_streams,
      .max_bytes_per_peer = limits.max_open_streams_per_peer,
      .what = "streams open",
      .unit = "streams",
      .peer_flag = "max_open_streams_per_peer",
      .total_flag = "max_open_streams"});
}

}  // namespace ferry
