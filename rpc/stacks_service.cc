#include "rpc/stacks_service.h"

#include <utility>

#include "absl/status/status.h"

namespace ferry {

StacksService::StacksService(Options options)
    : options_(std::move(options)), thread_([this] { Loop(); }) {}

StacksService::~StacksService() {
  std::vector<Promise<Value>> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  {
    absl::MutexLock lock(&mu_);
    dropped.swap(waiting_);
  }
  for (Promise<Value>& p : dropped) {
    p.Set(absl::UnavailableError("the worker is stopping"));
  }
}

Future<Value> StacksService::Get() {
  absl::MutexLock lock(&mu_);
  if (!capturing_ && last_.has_value() &&
      options_.clock->Now() - last_end_ < options_.min_interval) {
    return Future<Value>::Ready(*last_);
  }
  waiting_.emplace_back();
  return waiting_.back().future();
}

int64_t StacksService::captures() const {
  absl::MutexLock lock(&mu_);
  return captures_;
}

void StacksService::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !waiting_.empty();
      };
      mu_.Await(absl::Condition(&work));
      if (stopping_) return;
      capturing_ = true;
    }
    Value v = options_.capture();  // Outside the lock: the slow part.
    std::vector<Promise<Value>> answered;
    {
      absl::MutexLock lock(&mu_);
      // Those who asked while it ran get it too.
      answered.swap(waiting_);
      capturing_ = false;
      last_ = v;
      last_end_ = options_.clock->Now();
      ++captures_;
    }
    for (Promise<Value>& p : answered) p.Set(v);
  }
}

}  // namespace ferry
