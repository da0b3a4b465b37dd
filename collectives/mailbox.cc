#include "collectives/mailbox.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

namespace {
constexpr size_t kAbortedMemory = 4096;
// No message of a collective is this large: a sender announcing more is
// broken, and must not take the whole buffer.
constexpr int64_t kMaxMessageBytes = int64_t{1} << 40;
}  // namespace

Future<Value> Mailbox::Receive(const MessageKey& key) {
  absl::MutexLock lock(&mu_);
  auto aborted = aborted_.find(key.op);
  if (aborted != aborted_.end()) return Future<Value>::Ready(aborted->second);
  auto held = held_.find(key);
  if (held != held_.end()) {
    Value message = std::move(held->second.message);
    bytes_ -= held->second.bytes;
    held_.erase(held);
    return Future<Value>::Ready(std::move(message));
  }
  return waiting_[key].future();
}

absl::Status Mailbox::Admit(const MessageKey& key, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto aborted = aborted_.find(key.op);
  if (aborted != aborted_.end()) return aborted->second;
  if (bytes < 0 || bytes > kMaxMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a collective message of ", bytes, " bytes"));
  }
  // A message someone waits for is consumed at once: never refused.
  if (!waiting_.contains(key) && bytes > max_bytes_ - bytes_ && bytes_ > 0) {
    return absl::ResourceExhaustedError(absl::StrCat("collective buffer full (",
                                                     bytes_, " of ", max_bytes_,
                                                     " bytes held)"));
  }
  bytes_ += bytes;
  return absl::OkStatus();
}

void Mailbox::ReleaseLocked(int64_t bytes) { bytes_ -= bytes; }

void Mailbox::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  ReleaseLocked(bytes);
}

absl::Status Mailbox::Deliver(const MessageKey& key, Value message,
                              int64_t bytes) {
  Promise<Value> receiver;
  {
    absl::MutexLock lock(&mu_);
    auto aborted = aborted_.find(key.op);
    if (aborted != aborted_.end()) {
      ReleaseLocked(bytes);
      return aborted->second;
    }
    auto waiting = waiting_.find(key);
    if (waiting == waiting_.end()) {
      // Counted since Admit.
      if (!held_.try_emplace(key, Held{std::move(message), bytes}).second) {
        ReleaseLocked(bytes);
        return absl::AlreadyExistsError(
            absl::StrCat("message ", key.step, " of op ", key.op, " from rank ",
                         key.src, " arrived twice"));
      }
      return absl::OkStatus();
    }
    receiver = waiting->second;
    waiting_.erase(waiting);
    ReleaseLocked(bytes);
  }
  receiver.Set(std::move(message));
  return absl::OkStatus();
}

absl::Status Mailbox::Abort(const std::string& op, absl::Status status) {
  // An abort always fails the op (a peer may send code 0).
  if (status.ok())
    status = absl::UnknownError(absl::StrCat("op ", op, " aborted"));
  std::vector<Promise<Value>> receivers;
  std::vector<Value> dropped;  // Freed outside the lock.
  {
    absl::MutexLock lock(&mu_);
    auto [it, first] = aborted_.emplace(op, status);
    if (!first) return it->second;
    aborted_order_.push_back(op);
    if (aborted_order_.size() > kAbortedMemory) {
      aborted_.erase(aborted_order_.front());
      aborted_order_.pop_front();
    }
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      auto next = std::next(it);
      if (it->first.op == op) {
        receivers.push_back(it->second);
        waiting_.erase(it);
      }
      it = next;
    }
    for (auto it = held_.begin(); it != held_.end();) {
      auto next = std::next(it);
      if (it->first.op == op) {
        bytes_ -= it->second.bytes;
        dropped.push_back(std::move(it->second.message));
        held_.erase(it);
      }
      it = next;
    }
  }
  for (Promise<Value>& r : receivers) r.Set(status);
  return status;
}

void Mailbox::Close(const std::string& op) {
  Abort(op,
        absl::FailedPreconditionError(absl::StrCat("op ", op, " is over here")))
      .IgnoreError();
}

absl::Status Mailbox::AbortStatus(const std::string& op) const {
  absl::MutexLock lock(&mu_);
  auto it = aborted_.find(op);
  return it == aborted_.end() ? absl::OkStatus() : it->second;
}

int64_t Mailbox::held_bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int64_t Mailbox::held_messages() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size());
}

}  // namespace ferry
