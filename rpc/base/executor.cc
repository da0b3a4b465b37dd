#include "rpc/base/executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"

namespace ferry {

Executor::Executor(int threads, int64_t max_queued)
    : shared_(std::make_shared<Shared>()), max_queued_(max_queued) {
  if (threads < 1) threads = 1;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->live = threads;
  }
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back(Loop, shared_);
}

Executor::~Executor() { Stop(); }

absl::Status Executor::TrySubmit(Task task) {
  absl::MutexLock lock(&shared_->mu);
  if (shared_->stopping) return absl::UnavailableError("stopping");
  const int64_t queued = static_cast<int64_t>(shared_->queue.size());
  if (max_queued_ > 0 && queued >= max_queued_) {
    return OverLimit(absl::StrCat(queued, " tasks wait for a thread"),
                     absl::StrCat(max_queued_, " tasks"), "max_queued_tasks",
                     max_queued_);
  }
  shared_->queue.push_back(std::move(task));
  return absl::OkStatus();
}

void Executor::Stop(absl::Duration timeout) {
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
    done = shared_->mu.AwaitWithTimeout(absl::Condition(&all_exited), timeout);
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
