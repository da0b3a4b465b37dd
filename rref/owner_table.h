// The owner table: values this worker owns on behalf of remote references,
// with the forks (user copies) that keep each alive.
//
//   forks[rref] = {fork → holder, confirmed?}
//
// A value is freed when its last fork goes. Forks go when their holder
// deletes them, when the holder's lease expires or it is known dead, or —
// unconfirmed ones — when nobody confirmed them within one lease. So no
// value outlives every reference to it, and none is freed while a
// registered fork exists.
//
// Waits hold no thread: AddFork for an RRef whose creating call has not
// arrived yet, and Fetch for a value still being computed, park a callback
// until then or until their deadline (checked by Sweep()).
//
// Thread-safe. Callbacks run after the table's lock is released, on the
// thread of the call that completed them. Time comes from the Clock, so
// tests step it instead of sleeping.
#ifndef FERRY_RREF_OWNER_TABLE_H_
#define FERRY_RREF_OWNER_TABLE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/rref.pb.h"
#include "rpc/base/clock.h"
#include "rpc/value/value.h"

namespace ferry {

struct OwnerOptions {
  // Forks of a holder that has not renewed for this long are dropped, and
  // forks nobody confirmed within it.
  absl::Duration lease = absl::Seconds(10);
  // Most forks one holder may have on this owner (RESOURCE_EXHAUSTED).
  int64_t max_forks_per_holder = 1 << 20;
  // Freed ids are remembered this long, so a late request for one fails
  // at once instead of waiting for a creation that already happened.
  absl::Duration tombstone_ttl = absl::Seconds(60);
};

struct OwnerStats {
  int64_t owned = 0;        // Entries (values alive or being computed).
  int64_t forks = 0;        // Forks across entries.
  int64_t unconfirmed = 0;  // Forks registered but not yet confirmed.
  int64_t parked = 0;       // Requests waiting (AddFork, Fetch).
};

class OwnerTable {
 public:
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  using FetchDone = absl::AnyInvocable<void(absl::StatusOr<Value>) &&>;
  using WaitId = uint64_t;
  // Names nodes in messages ("worker2", "client1").
  using NodeNamer = std::function<std::string(uint64_t node)>;

  OwnerTable(uint64_t self_node, Clock* clock, OwnerOptions options,
             NodeNamer namer = nullptr);

  // ---- Creation ----

  // remote(): a pending entry with the creator's fork (confirmed: the
  // creation itself is the confirmation). Repeating it is a no-op.
  absl::Status Create(GlobalId rref, GlobalId fork, uint64_t creator)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The creating function's result becomes the entry's value or error.
  void Resolve(GlobalId rref, absl::StatusOr<Value> result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A ready entry holding `value`, with one fork held by this node.
  absl::Status AddLocal(GlobalId rref, GlobalId fork, Value value)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- The fork protocol ----

  // Registers `fork` (unconfirmed) for `holder`; `done` gets OK, NOT_FOUND
  // (already freed), RESOURCE_EXHAUSTED, or DEADLINE_EXCEEDED if the RRef
  // was not created by `deadline`. Returns an id for CancelWait if parked.
  WaitId AddFork(GlobalId rref, GlobalId fork, uint64_t holder,
                 absl::Time deadline, Done done) ABSL_LOCKS_EXCLUDED(mu_);
  // The holder has the fork. NOT_FOUND if it expired or was released.
  absl::Status ConfirmFork(GlobalId rref, GlobalId fork, uint64_t holder)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops `fork` (if `only_unconfirmed`, only an unconfirmed one). Unknown
  // forks are ignored: deletes are idempotent.
  void DeleteFork(GlobalId rref, GlobalId fork, bool only_unconfirmed)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The value, once ready (parked until then or `deadline`). `fork` must be
  // registered; GlobalId{} fetches locally without one.
  WaitId Fetch(GlobalId rref, GlobalId fork, absl::Time deadline,
               FetchDone done) ABSL_LOCKS_EXCLUDED(mu_);
  // The request behind a parked wait went away; its callback is dropped.
  // True if it was still parked (so its callback will never run).
  bool CancelWait(WaitId id) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Liveness ----

  // `holder` is alive; the listed forks (rref, fork) are confirmed.
  void RenewLease(uint64_t holder,
                  const std::vector<std::pair<GlobalId, GlobalId>>& forks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `holder` died or left: all its forks go now.
  void DropHolder(uint64_t holder) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the clock: expired leases, unconfirmed forks past one lease,
  // parked waits past their deadline, old tombstones.
  void Sweep() ABSL_LOCKS_EXCLUDED(mu_);
  // Fails every parked wait (the owner is stopping).
  void FailWaits(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Introspection ----
  OwnerStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<proto::OwnedRRef> List() const ABSL_LOCKS_EXCLUDED(mu_);
  const OwnerOptions& options() const { return options_; }

 private:
  struct Fork {
    uint64_t holder = 0;
    bool confirmed = false;
    absl::Time registered;
  };
  enum class State { kPending, kReady, kError };
  struct Entry {
    State state = State::kPending;
    Value value;
    absl::Status error;
    uint64_t creator = 0;
    absl::Time created;
    absl::flat_hash_map<GlobalId, Fork> forks;
    std::vector<WaitId> fetchers;  // Parked until the value is ready.
  };
  struct Wait {
    bool fetch = false;
    GlobalId rref;
    GlobalId fork;
    uint64_t holder = 0;
    absl::Time deadline;
    Done done;
    FetchDone fetch_done;
  };
  // Callbacks collected under the lock, run after it is released.
  using Deferred = std::vector<absl::AnyInvocable<void() &&>>;

  absl::Status RegisterForkLocked(Entry& entry, GlobalId fork, uint64_t holder,
                                  bool confirmed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveForkLocked(GlobalId rref, Entry& entry, GlobalId fork,
                        Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the entry if it has no forks left (a pending one when it resolves).
  void MaybeFreeLocked(GlobalId rref, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the parked waits for `rref` now that its entry exists.
  void UnparkLocked(GlobalId rref, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishFetchLocked(Wait& wait, const Entry& entry, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailWaitLocked(WaitId id, absl::Status status, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WaitId ParkLocked(Wait wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status GoneError(GlobalId rref) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Name(uint64_t node) const;
  static void Run(Deferred& later);

  const uint64_t self_;
  Clock* const clock_;
  const OwnerOptions options_;
  const NodeNamer namer_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<GlobalId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<WaitId, Wait> waits_ ABSL_GUARDED_BY(mu_);
  // Waits for entries that do not exist yet, by RRef.
  absl::flat_hash_map<GlobalId, std::vector<WaitId>> parked_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, absl::Time> lease_expiry_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, int64_t> forks_per_holder_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<GlobalId, absl::Time> tombstones_ ABSL_GUARDED_BY(mu_);
  WaitId next_wait_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace ferry

#endif  // FERRY_RREF_OWNER_TABLE_H_
