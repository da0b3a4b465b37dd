// The owner table: values this worker owns on behalf of remote references,
// with the forks (user copies) that keep each alive.
//
//   forks[rref] = {fork → holder, confirmed?}
//
// A value is freed when its last fork goes. Its bytes are charged to the
// RRef's creator (the node whose remote() made it) from when it is stored
// until it is freed, against a budget per creator and one for all
// (rpc/peer_budget.h): a value over either is not kept, and its RRef
// holds the RESOURCE_EXHAUSTED error instead. Forks go when their holder
// deletes them, when the holder's lease expires or it is known dead, when a
// complete listing round of the holder no longer lists them (reconciling:
// the delete was lost or is late), or — unconfirmed ones — one lease after
// their sender last vouched for them (the call carrying them is over). So no
// value outlives every reference to it, and none is freed while a
// registered fork exists.
//
// Orders that would lose or leak a value are made harmless here:
//   - a delete that arrives before its fork is registered (even before the
//     creating call) is remembered (bounded in count and time), and the
//     fork is never registered: the value is freed when it resolves;
//   - an abandon (the sender's call failed) does not drop a fork at once:
//     the fork waits for its holder's word. A confirm, or a listing round
//     naming it, keeps it; a round sent after the abandon (by epoch) that
//     does not name it, or one lease of silence, drops it.
//
// Waits hold no thread: AddFork for an RRef whose creating call has not
// arrived yet, and Fetch for a value still being computed, park a callback
// until then or until their deadline (checked by Sweep()).
//
// What a peer's message costs is its own share of the table, never the
// whole of it: forks are indexed by holder, so a listing round, a holder's
// death or its lease running out touches that holder's forks only, and a
// sweep touches only what may have expired (holders whose lease ran out,
// unconfirmed forks). A holder that floods rounds slows only itself.
//
// Thread-safe. Callbacks run after the table's lock is released, on the
// thread of the call that completed them. Time comes from the Clock, so
// tests step it instead of sleeping.
#ifndef FERRY_RREF_OWNER_TABLE_H_
#define FERRY_RREF_OWNER_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/rref.pb.h"
#include "rpc/base/clock.h"
#include "rpc/peer_budget.h"
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
  // Deletes of forks not (yet) registered are remembered this long, at
  // most this many (the oldest are forgotten first).
  absl::Duration early_delete_ttl = absl::Seconds(60);
  int64_t max_early_deletes = 1 << 16;
  // Bytes of values one creator's remote() calls may keep here, and all
  // creators' together (this node's own values, AddLocal and its own
  // remote() calls, are not charged). The flags that set them, for errors.
  int64_t max_value_bytes_per_creator = std::numeric_limits<int64_t>::max();
  int64_t max_value_bytes = std::numeric_limits<int64_t>::max();
  std::string per_creator_flag = "max_rref_mb_per_peer";
  std::string total_flag = "max_rref_mb";
};

// Most chunks one listing round may have (a peer's number, bounded).
inline constexpr uint32_t kMaxLeaseChunks = 4096;

// What one LeaseRequest tells an owner (proto/rref.proto).
struct LeaseListing {
  using Pair = std::pair<GlobalId, GlobalId>;  // (rref, fork)
  std::vector<Pair> forks;                     // Held by the holder: confirmed.
  std::vector<Pair> in_transit;  // Sent by the holder, call in flight.
  uint64_t round = 0;            // 0: not part of a round.
  uint32_t chunk = 0;
  uint32_t chunks = 1;
  uint64_t epoch = 0;  // Last epoch the holder got from this owner.
};

struct OwnerStats {
  int64_t owned = 0;          // Entries (values alive or being computed).
  int64_t forks = 0;          // Forks across entries.
  int64_t unconfirmed = 0;    // Forks registered but not yet confirmed.
  int64_t parked = 0;         // Requests waiting (AddFork, Fetch).
  int64_t abandoned = 0;      // Unconfirmed forks whose sender gave up.
  int64_t early_deletes = 0;  // Deletes remembered for forks not registered.
  // Bytes of values kept for other nodes' remote() calls (charged to their
  // creators).
  int64_t value_bytes = 0;
  // Forks examined for lease rounds, holder drops and sweeps, since the
  // table was made: the work peers' lease traffic has cost (a round costs
  // its holder's own forks).
  int64_t forks_walked = 0;
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
  // The creating function's result becomes the entry's value or error. A
  // value its creator's budget (or the table's) cannot hold is dropped:
  // the entry's error, and the answer, is RESOURCE_EXHAUSTED naming the
  // creator, the bytes and the flag. Otherwise the answer is the result's
  // status.
  absl::Status Resolve(GlobalId rref, absl::StatusOr<Value> result)
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
  // The holder has the fork (even if its sender abandoned it meanwhile);
  // `round` is the holder's first listing round that includes it (0:
  // unknown). NOT_FOUND if it expired or was released.
  absl::Status ConfirmFork(GlobalId rref, GlobalId fork, uint64_t holder,
                           uint64_t round = 0) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops `fork`. With `only_unconfirmed` (an abandon: the call carrying
  // the fork failed at its sender) a confirmed fork is kept, and an
  // unconfirmed one waits for its holder's word (see the top). A delete of
  // a fork not registered is remembered, unless the RRef was already freed:
  // deletes are idempotent.
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

  // `holder` is alive; the forks it lists are confirmed, those it lists in
  // transit kept another lease. When this completes a round (every chunk of
  // it arrived), the holder's confirmed forks the round does not list, and
  // its abandoned ones (abandoned before `listing.epoch`), are dropped.
  // Only what is the holder's counts: a listed fork registered for another
  // holder, or an in-transit fork the holder did not make (fork ids are
  // (creator, counter), and only a fork's creator registers it), is
  // ignored. Returns the epoch to send back; INVALID_ARGUMENT for a bad
  // chunk number.
  absl::StatusOr<uint64_t> RenewLease(uint64_t holder,
                                      const LeaseListing& listing)
      ABSL_LOCKS_EXCLUDED(mu_);
  // This owner's own sends still in flight: their forks kept another lease.
  void KeepInTransit(const std::vector<std::pair<GlobalId, GlobalId>>& forks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `holder` died or left: all its forks go now.
  void DropHolder(uint64_t holder) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the clock: expired leases, unconfirmed forks one lease past
  // their last vouch (abandoned ones: past their abandon), parked waits past
  // their deadline, old tombstones and remembered deletes.
  void Sweep() ABSL_LOCKS_EXCLUDED(mu_);
  // Fails every parked wait (the owner is stopping), and every later one
  // at once: a Fetch that arrives while the owner stops gets `status`, not
  // the server's bare CANCELLED.
  void FailWaits(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Who may ask (rref/rref_service.cc checks callers with it) ----
  struct ForkOwnership {
    bool known = false;  // The RRef's entry exists (created, not freed).
    bool gone = false;   // The RRef was freed (a tombstone remains).
    std::optional<uint64_t> holder;  // The fork's holder, if registered.
  };
  ForkOwnership Ownership(GlobalId rref, GlobalId fork) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `node` holds a registered fork of `rref` here (confirmed or
  // not): only a holder may pass a copy on or lend one to the owner.
  bool HoldsCopy(GlobalId rref, uint64_t node) const ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Introspection ----
  OwnerStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes of values charged to `creator` here now.
  int64_t value_bytes_of(uint64_t creator) const;
  std::vector<proto::OwnedRRef> List() const ABSL_LOCKS_EXCLUDED(mu_);
  const OwnerOptions& options() const { return options_; }

 private:
  struct Fork {
    uint64_t holder = 0;
    bool confirmed = false;
    // Unconfirmed: when its sender last vouched for it (registration, or a
    // renewal listing it in transit).
    absl::Time vouched;
    // Unconfirmed and its sender gave up: waiting for the holder's word.
    bool abandoned = false;
    absl::Time abandoned_at;
    uint64_t abandon_epoch = 0;
    // The holder's rounds: the first that includes it (from its confirm),
    // the last that listed it; 0 if none.
    uint64_t confirm_round = 0;
    uint64_t listed_round = 0;
  };
  struct Holder {
    absl::Time lease_expiry;
    // The listing round being assembled, its chunk count, chunks seen.
    uint64_t round = 0;
    uint32_t chunks = 0;
    absl::flat_hash_set<uint32_t> got;
  };
  using ForkKey = std::pair<GlobalId, GlobalId>;  // (rref, fork)
  enum class State { kPending, kReady, kError };
  struct Entry {
    State state = State::kPending;
    Value value;
    absl::Status error;
    uint64_t creator = 0;
    absl::Time created;
    // The value's bytes, charged to `charged_to` (the creator's name when
    // it was stored) until the entry is freed.
    int64_t charged = 0;
    std::string charged_to;
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

  // OK without registering if a delete of the fork was remembered.
  absl::Status RegisterForkLocked(GlobalId rref, Entry& entry, GlobalId fork,
                                  uint64_t holder, bool confirmed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The holder's record, with a fresh lease if it had none.
  Holder& HolderLocked(uint64_t holder) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberDeleteLocked(GlobalId rref, GlobalId fork)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fork becomes confirmed (and leaves the unconfirmed index).
  void ConfirmLocked(const ForkKey& key, Fork& fork)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fork at `key`, if registered.
  Fork* FindForkLocked(const ForkKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one chunk's listing; true if it completed its round.
  bool ApplyListingLocked(uint64_t holder, const LeaseListing& listing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops what a complete round of `holder` shows it no longer has.
  void ReconcileLocked(uint64_t holder, uint64_t round, uint64_t epoch,
                       Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveForksLocked(const std::vector<ForkKey>& victims, Deferred* later)
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
  // Values' bytes by creator (thread-safe on its own; taken under mu_).
  PeerBudget values_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<GlobalId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<WaitId, Wait> waits_ ABSL_GUARDED_BY(mu_);
  // Set by FailWaits: new waits fail with it.
  std::optional<absl::Status> stopped_ ABSL_GUARDED_BY(mu_);
  // Waits for entries that do not exist yet, by RRef.
  absl::flat_hash_map<GlobalId, std::vector<WaitId>> parked_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Holder> holders_ ABSL_GUARDED_BY(mu_);
  // Every registered fork by its holder (a holder with none has no entry):
  // what a round, a drop or an expired lease of one holder walks.
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<ForkKey>> by_holder_
      ABSL_GUARDED_BY(mu_);
  // Registered forks not confirmed yet: what a sweep checks for expiry
  // besides the holders whose lease ran out.
  absl::flat_hash_set<ForkKey> unconfirmed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<GlobalId, absl::Time> tombstones_ ABSL_GUARDED_BY(mu_);
  // Deletes of forks not registered, in arrival (so expiry) order.
  absl::flat_hash_set<ForkKey> early_deletes_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, ForkKey>> early_delete_order_
      ABSL_GUARDED_BY(mu_);
  // Abandons so far (all holders): orders an abandon against listings.
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t forks_walked_ ABSL_GUARDED_BY(mu_) = 0;  // OwnerStats.
  WaitId next_wait_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace ferry

#endif  // FERRY_RREF_OWNER_TABLE_H_
