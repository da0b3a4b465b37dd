#include "rpc/inflight.h"

#include <utility>
#include <vector>

namespace ferry {

InflightCalls::Token InflightCalls::Add(
    uint64_t node, std::shared_ptr<grpc::ClientContext> context) {
  absl::MutexLock lock(&mu_);
  Token t = next_++;
  calls_.emplace(t, Call{node, std::move(context), absl::OkStatus()});
  ++active_;
  return t;
}

absl::Status InflightCalls::Remove(Token token) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(token);
  if (it == calls_.end()) return absl::OkStatus();
  absl::Status failure = std::move(it->second.failure);
  calls_.erase(it);
  return failure;
}

void InflightCalls::Finished() {
  absl::MutexLock lock(&mu_);
  --active_;
}

void InflightCalls::FailNode(uint64_t node, const absl::Status& reason) {
  Cancel(false, node, reason);
}

void InflightCalls::CancelAll(const absl::Status& reason) {
  Cancel(true, 0, reason);
}

void InflightCalls::Cancel(bool all, uint64_t node,
                           const absl::Status& reason) {
  std::vector<std::shared_ptr<grpc::ClientContext>> victims;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [token, call] : calls_) {
      if (!all && call.node != node) continue;
      if (call.failure.ok()) call.failure = reason;
      victims.push_back(call.context);
    }
  }
  // Outside the lock: a cancelled call's completion calls Remove.
  for (auto& context : victims) context->TryCancel();
}

void InflightCalls::CancelOne(Token token, const absl::Status& reason) {
  std::shared_ptr<grpc::ClientContext> victim;
  {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(token);
    if (it == calls_.end()) return;
    if (it->second.failure.ok()) it->second.failure = reason;
    victim = it->second.context;
  }
  victim->TryCancel();
}

int64_t InflightCalls::size() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

bool InflightCalls::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

}  // namespace ferry
