// One generic stub per worker incarnation (rank and generation), made on
// first use and found without a lock afterwards (every call looks one up).
// Its channels carry no interceptor: the stub is handed out only with the
// call's context, which gets the node's secrets then — the credential made
// for that incarnation only (ChannelPool::ForWorkerStamped) — so no call
// through it can go without them, or with another destination's.
// A replacement of a rank (a later generation, at a new address) gets a
// stub of its own; the old one's stays until this object goes (calls may
// still use it; replacements are few: Directory::kMaxReplacements).
#ifndef FERRY_RPC_GENERIC_STUBS_H_
#define FERRY_RPC_GENERIC_STUBS_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "rpc/channels.h"
#include "rpc/membership/directory.h"
#include "rpc/shm_message.h"

namespace ferry {

class GenericStubs {
 public:
  explicit GenericStubs(ChannelPool* channels) : channels_(channels) {}

  // The stub for `worker`; `context`, the call about to start on it, gets
  // this node's secrets where they may go.
  grpc::GenericStub* For(const WorkerInfo& worker, grpc::ClientContext* context)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The memory files lent to `worker`'s incarnation (rpc/shm_message.h):
  // null when calls to it may not use them (not on this host).
  ShmPool* SharedMemory(const WorkerInfo& worker) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    int rank = -1;
    uint64_t generation = 0;
    std::unique_ptr<grpc::GenericStub> stub;
    // What its calls carry: the secrets made for this incarnation (null:
    // none may go there). Owned by the pool.
    const DestinationCredential* credential = nullptr;
    bool shared_memory = false;  // Calls may use memory files:
    mutable ShmPool files;       // these.
  };
  // The entry of `worker`'s incarnation.
  const Entry* Find(const WorkerInfo& worker) ABSL_LOCKS_EXCLUDED(mu_);
  std::unique_ptr<Entry> Make(const WorkerInfo& worker);
  // An older incarnation's entry (a call still naming it).
  const Entry* Retired(const WorkerInfo& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ChannelPool* const channels_;
  absl::Mutex mu_;
  // The current entry of each rank (a replaced one moves to retired_).
  absl::flat_hash_map<int, std::unique_ptr<Entry>> stubs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Entry>> retired_ ABSL_GUARDED_BY(mu_);
  static constexpr int kFast = 1024;
  std::atomic<const Entry*> fast_[kFast] = {};
};

}  // namespace ferry

#endif  // FERRY_RPC_GENERIC_STUBS_H_
