#include "collectives/transport/mailbox.h"

#include <climits>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

namespace {

constexpr char kBackpressure[] = "ferry/collectives/backpressure";
// What a held message costs beyond its payload and key (map node, Value).
constexpr int64_t kPerMessage = 256;

// The first key of `op` in key order.
MessageKey First(const std::string& op) { return {op, INT_MIN, INT_MIN}; }

}  // namespace

bool IsBackpressure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         status.GetPayload(kBackpressure).has_value();
}

Mailbox::Mailbox(const Limits& limits, Clock* clock)
    : max_bytes_(limits.max_mailbox_bytes),
      ttl_ms_(limits.mailbox_ttl_ms),
      clock_(clock) {}

int64_t Mailbox::Charge(const MessageKey& key, int64_t bytes) {
  return bytes + static_cast<int64_t>(key.op.size()) + kPerMessage;
}

const absl::Status* Mailbox::AbortedLocked(const std::string& op) const {
  auto it = aborted_.find(op);
  return it == aborted_.end() ? nullptr : &it->second;
}

Future<Value> Mailbox::Receive(const MessageKey& key,
                               std::optional<TensorLanding> landing) {
  absl::MutexLock lock(&mu_);
  if (const absl::Status* aborted = AbortedLocked(key.op))
    return Future<Value>::Ready(*aborted);
  if (std::optional<Value> held = TakeHeldLocked(key))
    return Future<Value>::Ready(*std::move(held));
  Waiter& waiter = waiting_[key];
  waiter.landing = std::move(landing);
  return waiter.promise.future();
}

std::optional<Value> Mailbox::TakeHeld(const MessageKey& key) {
  absl::MutexLock lock(&mu_);
  if (AbortedLocked(key.op) != nullptr) return std::nullopt;
  return TakeHeldLocked(key);
}

std::optional<Value> Mailbox::TakeHeldLocked(const MessageKey& key) {
  auto held = held_.find(key);
  if (held == held_.end()) return std::nullopt;
  Value message = std::move(held->second.message);
  ChargeLocked(key.src, -held->second.bytes);
  arrivals_.erase(held->second.arrival);
  held_.erase(held);
  return message;
}

bool Mailbox::Withdraw(const MessageKey& key) {
  Promise<Value> receiver;
  {
    absl::MutexLock lock(&mu_);
    auto waiting = waiting_.find(key);
    if (waiting == waiting_.end()) return false;
    receiver = waiting->second.promise;
    waiting_.erase(waiting);
  }
  receiver.Set(absl::CancelledError(
      absl::StrCat("the receive of message ", key.step, " of op ", key.op,
                   " from rank ", key.src, " was withdrawn")));
  return true;
}

std::optional<TensorLanding> Mailbox::TakeLanding(const MessageKey& key) {
  absl::MutexLock lock(&mu_);
  auto waiting = waiting_.find(key);
  if (waiting == waiting_.end()) return std::nullopt;
  return std::exchange(waiting->second.landing, std::nullopt);
}

void Mailbox::Begin(const std::string& op) {
  absl::MutexLock lock(&mu_);
  running_.insert(op);
}

absl::Status Mailbox::Admit(const MessageKey& key, int64_t bytes) {
  std::vector<Dropped> expired;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked(&expired);
    const int64_t charge = Charge(key, bytes);
    if (const absl::Status* aborted = AbortedLocked(key.op)) {
      status = *aborted;
    } else if (bytes < 0) {
      status = absl::InvalidArgumentError(
          absl::StrCat("a collective message of ", bytes, " bytes"));
    } else if (bytes > max_message_bytes()) {
      status = OverLimit(
          absl::StrCat("a collective message of ", HumanBytes(bytes), " (op ",
                       key.op, " from rank ", key.src, ")"),
          HumanBytes(max_bytes_), "max_mailbox_mb", max_bytes_ / Limits::kMiB);
    } else if (waiting_.contains(key)) {
      // A message someone waits for is consumed at once: never refused.
      ChargeLocked(key.src, charge);
    } else if (charge > max_bytes_ - bytes_) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("collective buffer full (", bytes_, " of ", max_bytes_,
                       " bytes held)"));
      status.SetPayload(kBackpressure, absl::Cord("1"));
    } else if (charge > max_bytes_ / 2 - SenderBytesLocked(key.src)) {
      // No sender holds more than half: the others always have room.
      status = absl::ResourceExhaustedError(absl::StrCat(
          "collective buffer: rank ", key.src, "'s messages hold ",
          SenderBytesLocked(key.src), " bytes here, and one sender may hold ",
          max_bytes_ / 2, " (half of --max_mailbox_mb) of messages not asked ",
          "for yet"));
      status.SetPayload(kBackpressure, absl::Cord("1"));
    } else {
      ChargeLocked(key.src, charge);
    }
  }
  Complete(std::move(expired));
  return status;
}

void Mailbox::Release(const MessageKey& key, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  ChargeLocked(key.src, -Charge(key, bytes));
}

void Mailbox::ChargeLocked(int src, int64_t delta) {
  bytes_ += delta;
  auto it = by_sender_.try_emplace(src, 0).first;
  it->second += delta;
  if (it->second == 0) by_sender_.erase(it);
}

int64_t Mailbox::SenderBytesLocked(int src) const {
  auto it = by_sender_.find(src);
  return it == by_sender_.end() ? 0 : it->second;
}

absl::Status Mailbox::Deliver(const MessageKey& key, Value message,
                              int64_t bytes) {
  const int64_t charge = Charge(key, bytes);
  Promise<Value> receiver;
  {
    absl::MutexLock lock(&mu_);
    if (const absl::Status* aborted = AbortedLocked(key.op)) {
      ChargeLocked(key.src, -charge);
      return *aborted;
    }
    auto waiting = waiting_.find(key);
    if (waiting == waiting_.end()) {
      // Counted since Admit.
      const Arrival arrival{clock_->Now(), next_arrival_++};
      if (!held_.try_emplace(key, Held{std::move(message), charge, arrival})
               .second) {
        ChargeLocked(key.src, -charge);
        return absl::AlreadyExistsError(
            absl::StrCat("message ", key.step, " of op ", key.op, " from rank ",
                         key.src, " arrived twice"));
      }
      if (!running_.contains(key.op)) arrivals_.emplace(arrival, key);
      return absl::OkStatus();
    }
    receiver = waiting->second.promise;
    waiting_.erase(waiting);
    ChargeLocked(key.src, -charge);
  }
  receiver.Set(std::move(message));
  return absl::OkStatus();
}

void Mailbox::RememberAbortLocked(const std::string& op,
                                  const absl::Status& status) {
  aborted_.emplace(op, status);
  aborted_order_.push_back(op);
  aborted_bytes_ += static_cast<int64_t>(op.size() + status.message().size());
  while (aborted_order_.size() > kAbortedMemory ||
         (aborted_bytes_ > kAbortedMemoryBytes && aborted_order_.size() > 1)) {
    auto oldest = aborted_.find(aborted_order_.front());
    aborted_bytes_ -= static_cast<int64_t>(oldest->first.size() +
                                           oldest->second.message().size());
    aborted_.erase(oldest);
    aborted_order_.pop_front();
  }
}

bool Mailbox::AbortLocked(const std::string& op, absl::Status status,
                          Dropped* out) {
  if (const absl::Status* earlier = AbortedLocked(op)) {
    out->status = *earlier;
    return false;
  }
  out->status = status;
  RememberAbortLocked(op, status);
  for (auto it = waiting_.lower_bound(First(op));
       it != waiting_.end() && it->first.op == op;) {
    out->receivers.push_back(it->second.promise);
    if (it->second.landing) out->landings.push_back(*it->second.landing);
    it = waiting_.erase(it);
  }
  for (auto it = held_.lower_bound(First(op));
       it != held_.end() && it->first.op == op;) {
    ChargeLocked(it->first.src, -it->second.bytes);
    arrivals_.erase(it->second.arrival);
    out->messages.push_back(std::move(it->second.message));
    it = held_.erase(it);
  }
  return true;
}

void Mailbox::Complete(std::vector<Dropped> dropped) {
  for (Dropped& d : dropped) {
    for (Promise<Value>& r : d.receivers) r.Set(d.status);
  }
}

absl::Status Mailbox::Abort(const std::string& op, absl::Status status) {
  // An abort always fails the op (a peer may send code 0).
  if (status.ok())
    status = absl::UnknownError(absl::StrCat("op ", op, " aborted"));
  std::vector<Dropped> dropped(1);
  {
    absl::MutexLock lock(&mu_);
    if (!AbortLocked(op, std::move(status), &dropped[0]))
      return dropped[0].status;
  }
  absl::Status failed = dropped[0].status;
  Complete(std::move(dropped));  // Messages are freed here, unlocked.
  return failed;
}

void Mailbox::Close(const std::string& op) {
  Abort(op,
        absl::FailedPreconditionError(absl::StrCat("op ", op, " is over here")))
      .IgnoreError();
  absl::MutexLock lock(&mu_);
  running_.erase(op);
}

absl::Status Mailbox::AbortStatus(const std::string& op) const {
  absl::MutexLock lock(&mu_);
  const absl::Status* aborted = AbortedLocked(op);
  return aborted == nullptr ? absl::OkStatus() : *aborted;
}

Future<Value> Mailbox::WhenAborted(const std::string& op) {
  // A receive no message can complete: every frame's src is a rank of the
  // job (CheckSender), never -1. Abort and Close fail it as any receive.
  return Receive({op, 0, -1});
}

absl::Status Mailbox::Expired(const MessageKey& key) const {
  return absl::DeadlineExceededError(absl::StrCat(
      "op ", key.op, ": a message from rank ", key.src,
      " was not asked for within ", ttl_ms_, " ms: the op did not begin here ",
      "in time, ",
      LimitNote(absl::StrCat(ttl_ms_, " ms"), "mailbox_ttl_ms", ttl_ms_)));
}

void Mailbox::ExpireLocked(std::vector<Dropped>* out) {
  const absl::Time stale = clock_->Now() - absl::Milliseconds(ttl_ms_);
  while (!arrivals_.empty() && arrivals_.begin()->first.first <= stale) {
    const MessageKey key = arrivals_.begin()->second;
    arrivals_.erase(arrivals_.begin());
    // A message of an op that began since waits for it until it closes.
    if (running_.contains(key.op)) continue;
    out->emplace_back();
    AbortLocked(key.op, Expired(key), &out->back());
  }
}

void Mailbox::ExpireStale() {
  std::vector<Dropped> expired;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked(&expired);
  }
  Complete(std::move(expired));
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
