#include "rpc/membership/directory.h"

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
  w.public_key = p.public_key();
  w.generation = p.generation();
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
  p.set_public_key(w.public_key);
  p.set_generation(w.generation);
  return p;
}

Directory::Directory() : state_(std::make_shared<State>(0)) {}

Directory::Directory(std::vector<WorkerInfo> workers)
    : state_(std::make_shared<State>(workers.size())) {
  absl::MutexLock lock(&state_->mu);
  for (size_t r = 0; r < workers.size(); ++r) {
    state_->by_name.emplace(workers[r].name, static_cast<int>(r));
    state_->entries.push_back(std::move(workers[r]));
    state_->current[r].store(&state_->entries.back(),
                             std::memory_order_release);
  }
}

std::vector<WorkerInfo> Directory::workers() const {
  std::vector<WorkerInfo> out;
  out.reserve(world_size());
  for (int r = 0; r < world_size(); ++r) out.push_back(at(r));
  return out;
}

absl::StatusOr<const WorkerInfo*> Directory::Resolve(
    const std::string& who) const {
  auto it = state_->by_name.find(who);
  if (it != state_->by_name.end()) return &at(it->second);
  int rank;
  if (absl::SimpleAtoi(who, &rank) && rank >= 0 && rank < world_size()) {
    return &at(rank);
  }
  std::vector<std::string> names;
  for (int r = 0; r < world_size(); ++r) names.push_back(at(r).name);
  return absl::NotFoundError(
      absl::StrCat("no worker named '", who,
                   "' (workers: ", absl::StrJoin(names, ", "), ")"));
}

absl::Status Directory::Replace(WorkerInfo worker) {
  if (worker.rank < 0 || worker.rank >= world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", worker.rank, " is out of range for world size ",
                     world_size()));
  }
  absl::MutexLock lock(&state_->mu);
  if (state_->entries.size() >=
      static_cast<size_t>(world_size()) + kMaxReplacements) {
    return absl::ResourceExhaustedError(
        absl::StrCat("worker", worker.rank,
                     " rejoined, but the directory "
                     "already holds ",
                     kMaxReplacements, " replacements"));
  }
  const int rank = worker.rank;
  // Appending to a deque moves no element: readers' references stay valid.
  state_->entries.push_back(std::move(worker));
  state_->current[rank].store(&state_->entries.back(),
                              std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace ferry
