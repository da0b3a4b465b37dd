// Who is in the job: the workers learned at rendezvous, by rank and name,
// and how node ids name workers and clients.
#ifndef FERRY_RPC_MEMBERSHIP_DIRECTORY_H_
#define FERRY_RPC_MEMBERSHIP_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/rendezvous.pb.h"

namespace ferry {

struct WorkerInfo {
  std::string name;
  int rank = -1;
  std::string address;        // host:port
  std::string local_address;  // unix-abstract:… for same-host peers, or "".
  std::string host;
  int64_t pid = 0;
  // SHA-256 (hex) of its credential: what calls from it must present.
  std::string credential_digest;
};

WorkerInfo WorkerInfoFromProto(const proto::WorkerInfo& p);
proto::WorkerInfo WorkerInfoToProto(const WorkerInfo& w);

// The workers of the job, indexed by rank. Immutable.
class Directory {
 public:
  Directory() = default;
  explicit Directory(std::vector<WorkerInfo> workers);

  int world_size() const { return static_cast<int>(workers_.size()); }
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  // Precondition: 0 <= rank < world_size().
  const WorkerInfo& at(int rank) const { return workers_[rank]; }

  // A worker by name, or by rank written as a number ("2").
  // NOT_FOUND lists the known names.
  absl::StatusOr<const WorkerInfo*> Resolve(const std::string& who) const;

 private:
  std::vector<WorkerInfo> workers_;
  absl::flat_hash_map<std::string, int> by_name_;
};

// Node ids: workers are their rank; clients get ids >= kFirstClientNode.
inline uint64_t WorkerNode(int rank) { return static_cast<uint64_t>(rank); }
inline bool IsWorkerNode(uint64_t node) { return node < (uint64_t{1} << 32); }

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_DIRECTORY_H_
