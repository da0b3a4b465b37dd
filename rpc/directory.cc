#include "rpc/directory.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry {

WorkerInfo WorkerInfoFromProto(const proto::WorkerInfo& p) {
  WorkerInfo w;
  w.name = p.name();
  w.rank = p.rank();
  w.address = p.address();
  w.local_address = p.local_address();
  w.host = p.host();
  w.pid = p.pid();
  return w;
}

proto::WorkerInfo WorkerInfoToProto(const WorkerInfo& w) {
  proto::WorkerInfo p;
  p.set_name(w.name);
  p.set_rank(w.rank);
  p.set_address(w.address);
  p.set_local_address(w.local_address);
  p.set_host(w.host);
  p.set_pid(w.pid);
  return p;
}

Directory::Directory(std::vector<WorkerInfo> workers)
    : workers_(std::move(workers)) {
  for (const WorkerInfo& w : workers_) by_name_.emplace(w.name, w.rank);
}

absl::StatusOr<const WorkerInfo*> Directory::Resolve(
    const std::string& who) const {
  auto it = by_name_.find(who);
  if (it != by_name_.end()) return &workers_[it->second];
  int rank;
  if (absl::SimpleAtoi(who, &rank) && rank >= 0 && rank < world_size()) {
    return &workers_[rank];
  }
  std::vector<std::string> names;
  for (const WorkerInfo& w : workers_) names.push_back(w.name);
  return absl::NotFoundError(
      absl::StrCat("no worker named '", who,
                   "' (workers: ", absl::StrJoin(names, ", "), ")"));
}

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
    listeners = listeners_;
  }
  for (const Listener& l : listeners) l(node, reason);
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
