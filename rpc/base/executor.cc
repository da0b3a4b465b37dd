#include "rpc/base/executor.h"

#include <utility>

namespace ferry {

Executor::Executor(int threads) : shared_(std::make_shared<Shared>()) {
  if (threads < 1) threads = 1;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->live = threads;
  }
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back(Loop, shared_);
}

Executor::~Executor() { Stop(); }

bool Executor::Submit(Task task) {
  absl::MutexLock lock(&shared_->mu);
  if (shared_->stopping) return false;
  shared_->queue.push_back(std::move(task));
  return true;
}

void Executor::Stop(absl::Time deadline) {
  if (stopped_) return;
  stopped_ = true;
  bool done;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stopping = true;
    Shared* s = shared_.get();
    auto all_exited = [s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
      return s->live == 0;
    };
    done =
        shared_->mu.AwaitWithDeadline(absl::Condition(&all_exited), deadline);
  }
  for (std::thread& t : threads_) {
    if (done) {
      t.join();
    } else {
      t.detach();
    }
  }
}

int64_t Executor::queued() const {
  absl::MutexLock lock(&shared_->mu);
  return static_cast<int64_t>(shared_->queue.size());
}

int64_t Executor::running() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->running;
}

void Executor::Loop(std::shared_ptr<Shared> s) {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&s->mu);
      auto ready = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
        return s->stopping || !s->queue.empty();
      };
      s->mu.Await(absl::Condition(&ready));
      if (s->queue.empty()) {  // Stopping and drained.
        --s->live;
        return;
      }
      task = std::move(s->queue.front());
      s->queue.pop_front();
      ++s->running;
    }
    std::move(task)();
    task = nullptr;
    absl::MutexLock lock(&s->mu);
    --s->running;
  }
}

}  // namespace ferry
