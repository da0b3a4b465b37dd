// Where collective messages wait for their receiver. A message is keyed by
// (op, step, source rank); it may arrive before the local call asks for it
// (it is held, within a memory bound) or after (the receiver waits).
//
// An aborted op fails its waiting receives at once with the abort's status,
// drops the messages it held, and refuses later ones, so a failed op leaves
// nothing behind and cannot disturb the next.
//
// Thread-safe; receivers' futures are completed outside the lock.
#ifndef FERRY_COLLECTIVES_MAILBOX_H_
#define FERRY_COLLECTIVES_MAILBOX_H_

#include <cstdint>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"

namespace ferry {

struct MessageKey {
  std::string op;
  int step = 0;
  int src = 0;  // Global rank of the sender.

  friend bool operator==(const MessageKey& a, const MessageKey& b) {
    return a.op == b.op && a.step == b.step && a.src == b.src;
  }
  template <typename H>
  friend H AbslHashValue(H h, const MessageKey& k) {
    return H::combine(std::move(h), k.op, k.step, k.src);
  }
};

class Mailbox {
 public:
  // `max_bytes`: most bytes held for messages nobody asked for yet.
  explicit Mailbox(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The message for `key`, once it arrives (or the op's abort status).
  Future<Value> Receive(const MessageKey& key) ABSL_LOCKS_EXCLUDED(mu_);

  // May a message of `bytes` for `key` be buffered now? OK; the op's abort
  // status; INVALID_ARGUMENT for an impossible size; or RESOURCE_EXHAUSTED
  // if it is not awaited and would exceed the bound (the sender retries
  // later: that is the backpressure).
  absl::Status Admit(const MessageKey& key, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Gives back what Admit counted for a message that will not be delivered.
  void Release(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // A whole message arrived (after Admit). Returns the op's abort status if
  // it was aborted meanwhile; ALREADY_EXISTS for a duplicate.
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

  int64_t held_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t held_messages() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Held {
    Value message;
    int64_t bytes = 0;
  };
  // Bytes admitted but not yet delivered count against the bound too.
  void ReleaseLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<MessageKey, Held> held_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<MessageKey, Promise<Value>> waiting_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Recently aborted ops (bounded: the oldest are forgotten).
  absl::flat_hash_map<std::string, absl::Status> aborted_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> aborted_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_MAILBOX_H_
