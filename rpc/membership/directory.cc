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
  w.credential_digest = p.credential_digest();
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
  p.set_credential_digest(w.credential_digest);
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

}  // namespace ferry
