#include "rpc/generic_stubs.h"

namespace ferry {

grpc::GenericStub* GenericStubs::For(const WorkerInfo& worker) {
  const bool fast = worker.rank >= 0 && worker.rank < kFast;
  if (fast) {
    if (grpc::GenericStub* stub = fast_[worker.rank].load()) return stub;
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<grpc::GenericStub>& stub = stubs_[worker.rank];
  if (stub == nullptr) {
    stub = std::make_unique<grpc::GenericStub>(channels_->ForWorker(worker));
  }
  if (fast) fast_[worker.rank].store(stub.get());
  return stub.get();
}

}  // namespace ferry
