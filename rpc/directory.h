// Who is in the job: the workers learned at rendezvous (fixed for the job's
// life), and which nodes (workers or clients) have since died or left.
#ifndef FERRY_RPC_DIRECTORY_H_
#define FERRY_RPC_DIRECTORY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/rendezvous.pb.h"

namespace ferry {

struct WorkerInfo {
  std::string name;
  int rank = -1;
  std::string address;        // host:port
  std::string local_address;  // unix-abstract:… for same-host peers, or "".
  std::string host;
  int64_t pid = 0;
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

// Nodes known to be gone, with why. Listeners hear of each node once,
// outside the lock, on the thread that reported it.
class Membership {
 public:
  using Listener =
      std::function<void(uint64_t node, const absl::Status& reason)>;

  void AddListener(Listener listener) ABSL_LOCKS_EXCLUDED(mu_);

  // Records `node` as gone (reason: UNAVAILABLE naming it). False if it was
  // already known gone.
  bool MarkDown(uint64_t node, absl::Status reason) ABSL_LOCKS_EXCLUDED(mu_);

  // Why `node` is gone, if it is.
  std::optional<absl::Status> DownReason(uint64_t node) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint64_t> DownNodes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, absl::Status> down_ ABSL_GUARDED_BY(mu_);
  // Nodes in down_, readable without the lock: every call asks, and
  // usually nobody is down.
  std::atomic<int64_t> down_count_{0};
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_DIRECTORY_H_
