// One generic stub per worker rank, made on first use and found without a
// lock afterwards (every call looks one up).
#ifndef FERRY_RPC_GENERIC_STUBS_H_
#define FERRY_RPC_GENERIC_STUBS_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "rpc/channels.h"
#include "rpc/membership/directory.h"

namespace ferry {

class GenericStubs {
 public:
  explicit GenericStubs(ChannelPool* channels) : channels_(channels) {}

  grpc::GenericStub* For(const WorkerInfo& worker) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ChannelPool* const channels_;
  absl::Mutex mu_;
  absl::flat_hash_map<int, std::unique_ptr<grpc::GenericStub>> stubs_
      ABSL_GUARDED_BY(mu_);
  static constexpr int kFast = 1024;
  std::atomic<grpc::GenericStub*> fast_[kFast] = {};
};

}  // namespace ferry

#endif  // FERRY_RPC_GENERIC_STUBS_H_
