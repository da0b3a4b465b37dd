// Who is in the job: the workers learned at rendezvous, by rank and name,
// and how node ids name workers and clients.
#ifndef FERRY_RPC_MEMBERSHIP_DIRECTORY_H_
#define FERRY_RPC_MEMBERSHIP_DIRECTORY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
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
  // Its incarnation's X25519 public key (rpc/auth/node_key.h): calls from it
  // present credentials checked with it, calls to it credentials made
  // for it.
  std::string public_key;
  // How many incarnations held this rank before this one (0: the first);
  // the same on every node (the membership backend numbers them).
  uint64_t generation = 0;
};

WorkerInfo WorkerInfoFromProto(const proto::WorkerInfo& p);
proto::WorkerInfo WorkerInfoToProto(const WorkerInfo& w);

// The workers of the job, indexed by rank. The set of ranks and their
// names are fixed when the job forms; a rank's entry is replaced when a new
// incarnation takes the rank over (a replacement worker), and copies of a
// Directory share their entries, so every layer holding one sees it.
// Thread-safe; reading an entry takes no lock.
class Directory {
 public:
  // At most this many replacements over a directory's life: entries are
  // never freed (references handed out stay valid), so they are bounded.
  static constexpr int kMaxReplacements = 1 << 16;

  Directory();
  explicit Directory(std::vector<WorkerInfo> workers);

  int world_size() const { return static_cast<int>(state_->current.size()); }
  // The current entries, by rank.
  std::vector<WorkerInfo> workers() const;
  // Precondition: 0 <= rank < world_size(). The reference stays valid for
  // the life of the directory (and its copies), even once replaced.
  const WorkerInfo& at(int rank) const {
    return *state_->current[rank].load(std::memory_order_acquire);
  }

  // A worker by name (as the job formed), or by rank written as a number
  // ("2"): its current entry. NOT_FOUND lists the known names.
  absl::StatusOr<const WorkerInfo*> Resolve(const std::string& who) const;

  // A new incarnation holds worker.rank now, at its address.
  // INVALID_ARGUMENT for a rank out of range; RESOURCE_EXHAUSTED past
  // kMaxReplacements.
  absl::Status Replace(WorkerInfo worker);

 private:
  struct State {
    explicit State(size_t n) : current(n) {}
    // Points into `entries`. Sized once.
    std::vector<std::atomic<const WorkerInfo*>> current;
    // Constant after construction.
    absl::flat_hash_map<std::string, int> by_name;
    absl::Mutex mu;
    // Every entry ever held; never shrinks.
    std::deque<WorkerInfo> entries ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

// Node ids: workers are their rank; clients get ids >= kFirstClientNode.
inline uint64_t WorkerNode(int rank) { return static_cast<uint64_t>(rank); }
inline bool IsWorkerNode(uint64_t node) { return node < (uint64_t{1} << 32); }

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_DIRECTORY_H_
