#include "rpc/generic_stubs.h"

#include <utility>

namespace ferry {

grpc::GenericStub* GenericStubs::For(const WorkerInfo& worker,
                                     grpc::ClientContext* context) {
  const Entry* e = Find(worker);
  if (e->credential != nullptr) e->credential->AddTo(context);
  return e->stub.get();
}

ShmPool* GenericStubs::SharedMemory(const WorkerInfo& worker) {
  const Entry* e = Find(worker);
  return e->shared_memory ? &e->files : nullptr;
}

const GenericStubs::Entry* GenericStubs::Find(const WorkerInfo& worker) {
  const bool fast = worker.rank >= 0 && worker.rank < kFast;
  if (fast) {
    const Entry* e = fast_[worker.rank].load(std::memory_order_acquire);
    if (e != nullptr && e->generation == worker.generation) return e;
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Entry>& entry = stubs_[worker.rank];
  if (entry != nullptr && entry->generation > worker.generation) {
    return Retired(worker);
  }
  if (entry == nullptr || entry->generation != worker.generation) {
    if (entry != nullptr) {
      entry->files.Close();  // Its pages go back; nothing reuses them.
      retired_.push_back(std::move(entry));
    }
    entry = Make(worker);
  }
  if (fast) fast_[worker.rank].store(entry.get(), std::memory_order_release);
  return entry.get();
}

std::unique_ptr<GenericStubs::Entry> GenericStubs::Make(
    const WorkerInfo& worker) {
  auto e = std::make_unique<Entry>();
  e->rank = worker.rank;
  e->generation = worker.generation;
  ChannelPool::Stamped stamped = channels_->ForWorkerStamped(worker);
  e->stub = std::make_unique<grpc::GenericStub>(std::move(stamped.channel));
  e->credential = stamped.credential;
  e->shared_memory = channels_->SharedMemoryTo(worker);
  return e;
}

const GenericStubs::Entry* GenericStubs::Retired(const WorkerInfo& worker) {
  for (const auto& e : retired_) {
    if (e->rank == worker.rank && e->generation == worker.generation) {
      return e.get();
    }
  }
  retired_.push_back(Make(worker));
  return retired_.back().get();
}

}  // namespace ferry
