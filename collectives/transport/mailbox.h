// Where collective messages wait for their receiver. A message is keyed by
// (op, step, source rank); it may arrive before the local call asks for it
// (it is held, within a memory bound) or after (the receiver waits).
//
// An aborted op fails its waiting receives at once with the abort's status,
// drops the messages it held, and refuses later ones, so a failed op leaves
// nothing behind and cannot disturb the next.
//
// What a peer can make the mailbox hold is bounded (Limits):
//  - one message: at most --max_mailbox_mb (plus kFramingAllowance, so a
//    1 GiB tensor still travels), whether or not it is awaited and however
//    empty the mailbox is: larger ones are refused, RESOURCE_EXHAUSTED
//    naming the flag;
//  - all messages not yet asked for, with the bytes of messages still
//    arriving and each message's op key: at most --max_mailbox_mb; beyond,
//    a message is refused for now (RESOURCE_EXHAUSTED marked as
//    backpressure, IsBackpressure: the sender retries later). A message
//    someone waits for is consumed at once, so it is never refused for room;
//  - one sender's messages not yet asked for (held and arriving, counted as
//    above): at most half of --max_mailbox_mb; beyond, its next is refused
//    for now (backpressure), so no sender fills the mailbox for the others
//    (a message larger than half waits until its receiver asks for it);
//  - time: a message for an op that has not begun here is kept for
//    --mailbox_ttl_ms (by the injected clock); then ExpireStale fails the op
//    here with DEADLINE_EXCEEDED naming the flag and drops its messages.
//    An op that began here, or is queued to (Begin), keeps its messages
//    until it closes;
//  - aborts: at most kAbortedMemory of them are remembered (the oldest are
//    forgotten), with at most kAbortedMemoryBytes of op keys and errors.
//
// Thread-safe; receivers' futures are completed outside the lock.
#ifndef FERRY_COLLECTIVES_TRANSPORT_MAILBOX_H_
#define FERRY_COLLECTIVES_TRANSPORT_MAILBOX_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/value.h"

namespace ferry {

struct MessageKey {
  std::string op;
  int step = 0;
  int src = 0;  // Global rank of the sender.

  friend bool operator==(const MessageKey& a, const MessageKey& b) {
    return a.op == b.op && a.step == b.step && a.src == b.src;
  }
  // By op first, so an op's messages are one range.
  friend bool operator<(const MessageKey& a, const MessageKey& b) {
    return std::tie(a.op, a.step, a.src) < std::tie(b.op, b.step, b.src);
  }
  template <typename H>
  friend H AbslHashValue(H h, const MessageKey& k) {
    return H::combine(std::move(h), k.op, k.step, k.src);
  }
};

// Whether `status` is the mailbox's "no room yet" (retry later) rather than
// a refusal for good.
bool IsBackpressure(const absl::Status& status);

class Mailbox {
 public:
  // A message may exceed --max_mailbox_mb by this much: the framing of a
  // tensor of exactly that size.
  static constexpr int64_t kFramingAllowance = 64 * 1024;
  static constexpr size_t kAbortedMemory = 4096;
  static constexpr int64_t kAbortedMemoryBytes = 4 << 20;

  // Bounds from `limits` (max_mailbox_bytes, mailbox_ttl_ms); time from
  // `clock`.
  Mailbox(const Limits& limits, Clock* clock);

  // The message for `key`, once it arrives (or the op's abort status).
  // `landing`: where the message's first tensor should be received, if it
  // has not arrived yet and the tensor is the landing's size (TakeLanding).
  Future<Value> Receive(const MessageKey& key,
                        std::optional<TensorLanding> landing = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The message for `key` if it arrived whole and its op was not aborted
  // (taken, as Receive takes it); nothing otherwise, and nothing waits.
  std::optional<Value> TakeHeld(const MessageKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Withdraws the receive (made without a landing) waiting for `key`: its
  // future fails CANCELLED, and the message, when it comes, is held as if
  // nobody had asked. False if none was waiting (its message came).
  bool Withdraw(const MessageKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  // The landing a receiver waiting for `key` offered, handed out once: to
  // the transport about to decode that message.
  std::optional<TensorLanding> TakeLanding(const MessageKey& key)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Op `op` runs here from now until Close: its messages wait for it,
  // however old.
  void Begin(const std::string& op) ABSL_LOCKS_EXCLUDED(mu_);

  // The largest message Admit takes, in payload bytes.
  int64_t max_message_bytes() const { return max_bytes_ + kFramingAllowance; }
  // What a message of `bytes` payload bytes for `key` counts against
  // --max_mailbox_mb: its payload, its key and a fixed overhead.
  static int64_t Charge(const MessageKey& key, int64_t bytes);

  // May a message of `bytes` payload bytes for `key` be buffered now? OK
  // (its bytes are counted from now on); the op's abort status;
  // INVALID_ARGUMENT for a negative size; RESOURCE_EXHAUSTED naming
  // --max_mailbox_mb for one over max_message_bytes(); or backpressure if
  // it is not awaited and there is no room (see above).
  absl::Status Admit(const MessageKey& key, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Gives back what Admit counted for a message that will not be delivered.
  void Release(const MessageKey& key, int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // A whole message arrived (after Admit of `bytes`). Returns the op's
  // abort status if it was aborted meanwhile; ALREADY_EXISTS for a
  // duplicate. Either way the bytes are settled.
  absl::Status Deliver(const MessageKey& key, Value message, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Fails the op: its receives now and later, its held messages dropped.
  // Returns the status the op failed with: `status` (UNKNOWN if OK), or an
  // earlier abort's — the first abort wins.
  absl::Status Abort(const std::string& op, absl::Status status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The op is over here: later messages for it are refused (and any held
  // ones dropped), so nothing of it stays behind.
  void Close(const std::string& op) ABSL_LOCKS_EXCLUDED(mu_);
  // The abort status of `op`, or OK.
  absl::Status AbortStatus(const std::string& op) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Fails with `op`'s abort status once it is aborted or closed (at once if
  // it was); never succeeds.
  Future<Value> WhenAborted(const std::string& op) ABSL_LOCKS_EXCLUDED(mu_);

  // Fails the ops that have not begun here and whose oldest held message
  // arrived --mailbox_ttl_ms ago or more. Also done by Admit; call it
  // periodically so idle mailboxes empty too.
  void ExpireStale() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t held_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t held_messages() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // When a message arrived, and its place in arrival order.
  using Arrival = std::pair<absl::Time, uint64_t>;
  struct Held {
    Value message;
    int64_t bytes = 0;  // As counted (with the key).
    Arrival arrival;
  };
  struct Waiter {
    Promise<Value> promise;
    std::optional<TensorLanding> landing;  // Until TakeLanding.
  };
  struct Dropped {  // What an abort completes and frees outside the lock.
    std::vector<Promise<Value>> receivers;
    std::vector<TensorLanding> landings;
    std::vector<Value> messages;
    absl::Status status;
  };

  const absl::Status* AbortedLocked(const std::string& op) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes and returns the held message for `key`, if there is one.
  std::optional<Value> TakeHeldLocked(const MessageKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the abort; fills `out` with what to fail and free. False if
  // the op was aborted before (`out->status` is that abort's).
  bool AbortLocked(const std::string& op, absl::Status status, Dropped* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberAbortLocked(const std::string& op, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked(std::vector<Dropped>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Expired(const MessageKey& key) const;
  static void Complete(std::vector<Dropped> dropped);
  // Adds `delta` to the bytes counted, and to sender `src`'s.
  void ChargeLocked(int src, int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t SenderBytesLocked(int src) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  const int64_t ttl_ms_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  // Ordered, so aborting an op visits only its own messages.
  std::map<MessageKey, Held> held_ ABSL_GUARDED_BY(mu_);
  std::map<MessageKey, Waiter> waiting_ ABSL_GUARDED_BY(mu_);
  // Bytes held and admitted (still arriving), each with its key.
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The same by sender (global rank); none at 0.
  absl::flat_hash_map<int, int64_t> by_sender_ ABSL_GUARDED_BY(mu_);
  // Held messages of ops that had not begun when they arrived, oldest
  // first: what ExpireStale looks at.
  std::map<Arrival, MessageKey> arrivals_ ABSL_GUARDED_BY(mu_);
  uint64_t next_arrival_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<std::string> running_ ABSL_GUARDED_BY(mu_);
  // Recently aborted ops (bounded: the oldest are forgotten).
  absl::flat_hash_map<std::string, absl::Status> aborted_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> aborted_order_ ABSL_GUARDED_BY(mu_);
  int64_t aborted_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_MAILBOX_H_
