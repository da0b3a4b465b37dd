#include "rpc/base/timers.h"

#include "absl/time/clock.h"

namespace ferry {

Timers::Timers() : thread_([this] { Loop(); }) {}

Timers::~Timers() { Stop(); }

Timers::TimerId Timers::RunAt(absl::Time when, Callback cb) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return 0;
  TimerId id = next_id_++;
  queue_.emplace(std::make_pair(when, id), std::move(cb));
  when_.emplace(id, when);
  wake_.Signal();
  return id;
}

bool Timers::Cancel(TimerId id) {
  Callback dropped;  // Destroyed after unlocking: it may own anything.
  absl::MutexLock lock(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  auto node = queue_.extract(std::make_pair(it->second, id));
  dropped = std::move(node.mapped());
  when_.erase(it);
  return true;
}

void Timers::Stop() {
  std::map<std::pair<absl::Time, TimerId>, Callback> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
    when_.clear();
    wake_.Signal();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

void Timers::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.Wait(&mu_);
      continue;
    }
    auto first = queue_.begin();
    absl::Time due = first->first.first;
    if (absl::Now() < due) {
      // RunAt and Stop signal, so an earlier timer or a stop wakes us.
      wake_.WaitWithDeadline(&mu_, due);
      continue;
    }
    Callback cb = std::move(first->second);
    when_.erase(first->first.second);
    queue_.erase(first);
    mu_.Unlock();
    std::move(cb)();
    cb = nullptr;  // Destroy captures outside the lock.
    mu_.Lock();
  }
}

}  // namespace ferry
