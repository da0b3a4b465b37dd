#include "rpc/generic_stubs.h"

#include <utility>

namespace ferry {

grpc::GenericStub* GenericStubs::For(const WorkerInfo& worker) {
  const bool fast = worker.rank >= 0 && worker.rank < kFast;
  if (fast) {
    const Entry* e = fast_[worker.rank].load(std::memory_order_acquire);
    if (e != nullptr && e->generation == worker.generation) {
      return e->stub.get();
    }
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Entry>& entry = stubs_[worker.rank];
  if (entry != nullptr && entry->generation > worker.generation) {
    return Retired(worker);
  }
  if (entry == nullptr || entry->generation != worker.generation) {
    if (entry != nullptr) retired_.push_back(std::move(entry));
    entry = std::make_unique<Entry>(Entry{
        worker.rank, worker.generation,
        std::make_unique<grpc::GenericStub>(channels_->ForWorker(worker))});
  }
  if (fast) fast_[worker.rank].store(entry.get(), std::memory_order_release);
  return entry->stub.get();
}

grpc::GenericStub* GenericStubs::Retired(const WorkerInfo& worker) {
  for (const auto& e : retired_) {
    if (e->rank == worker.rank && e->generation == worker.generation) {
      return e->stub.get();
    }
  }
  retired_.push_back(std::make_unique<Entry>(Entry{
      worker.rank, worker.generation,
      std::make_unique<grpc::GenericStub>(channels_->ForWorker(worker))}));
  return retired_.back()->stub.get();
}

}  // namespace ferry
