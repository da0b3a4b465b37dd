// Which nodes (workers or clients) have died or left, and why; listeners
// hear of each once.
#ifndef FERRY_RPC_MEMBERSHIP_MEMBERSHIP_H_
#define FERRY_RPC_MEMBERSHIP_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

// Nodes known to be gone, with why. Listeners hear of each node once,
// outside the lock, on the thread that reported it.
//
// Memory stays bounded however many short-lived clients come and go:
// workers' entries stay for the process's life or until the rank is taken
// by a new incarnation (Revive; every call to a worker asks whether it is
// gone), but only the kClientMemory most recent clients' entries are
// kept. Forgetting an older one is harmless: client node ids are never
// reused, nothing sends to a client, and if its departure is reported
// again, listeners hear of it again — what they do for a gone client (drop
// its RRef forks) is idempotent.
class Membership {
 public:
  static constexpr size_t kClientMemory = 1024;

  using Listener =
      std::function<void(uint64_t node, const absl::Status& reason)>;

  void AddListener(Listener listener) ABSL_LOCKS_EXCLUDED(mu_);

  // Records `node` as gone (reason: UNAVAILABLE naming it). False if it was
  // already known gone.
  bool MarkDown(uint64_t node, absl::Status reason) ABSL_LOCKS_EXCLUDED(mu_);

  // A new incarnation of worker `node` joined (a replacement worker): it is
  // no longer gone. Only for workers; listeners are not told (what they
  // did for the old incarnation stays done). False if it was not gone.
  bool Revive(uint64_t node) ABSL_LOCKS_EXCLUDED(mu_);

  // Why `node` is gone, if it is.
  std::optional<absl::Status> DownReason(uint64_t node) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint64_t> DownNodes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, absl::Status> down_ ABSL_GUARDED_BY(mu_);
  // The clients in down_, oldest first.
  std::deque<uint64_t> down_clients_ ABSL_GUARDED_BY(mu_);
  // Nodes in down_, readable without the lock: every call asks, and
  // usually nobody is down.
  std::atomic<int64_t> down_count_{0};
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_MEMBERSHIP_H_
