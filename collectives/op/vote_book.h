// The votes of a worker's agreements in progress
// (collectives/elastic/elastic.h's Agree): each member of the group sends its
// flag to every other member; a member's collection is complete once every
// other member voted or is known gone. Which of the complete collections counts
// is decided once for the whole job by the membership's store (elastic.cc) — a
// vote that reached one member and not another (its sender died while sending)
// cannot split the survivors.
//
//   VoteBook book(&timers, world_size, [&](int r) { return IsDown(r); });
//   book.Collect(key, members, self, true, deadline)
//       .Then([](const absl::StatusOr<VoteBook::Votes>& votes) { … });
//   book.Vote(key, /*from=*/2, /*flag=*/false);    // ferry.agree_vote
//   book.Recheck();                                // a worker went down
//
// Bounded whatever peers send: votes are taken only from members of the
// key's group (op_key.h's CheckSender), one per member. Votes for
// agreements not (yet) collected here ("early") are bounded per sender:
// at most kMaxEarlyPerGroup in one group, kMaxEarlyPerSender in all, with
// at most kMaxEarlyBytesPerSender of keys; past either, that sender's own
// oldest early vote (in the group, then in all) is dropped. No sender can
// push out another's vote: a non-member flooding a worker with votes for
// other groups loses only its own.
#ifndef FERRY_COLLECTIVES_OP_VOTE_BOOK_H_
#define FERRY_COLLECTIVES_OP_VOTE_BOOK_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"

namespace ferry {

class VoteBook {
 public:
  static constexpr size_t kMaxEarlyPerGroup = 4;
  static constexpr size_t kMaxEarlyPerSender = 64;
  static constexpr size_t kMaxEarlyBytesPerSender = 256 << 10;

  // Global rank → flag, of the members that voted (this worker included).
  using Votes = std::map<int, bool>;

  // `is_gone(global rank, generation)`: whether that incarnation of the
  // worker is known gone (dead, or replaced by a later one). `timers` must
  // outlive the book (Stop() first).
  VoteBook(Timers* timers, int world_size,
           std::function<bool(int, uint64_t)> is_gone);
  ~VoteBook();

  // Collects agreement `key` (an op key of the group of `members`, global
  // ranks in group order, at `generations`, this worker `self` among them)
  // with this worker's `flag`: resolves with the votes once every member
  // voted or is gone; DEADLINE_EXCEEDED at `deadline` naming the members that
  // neither voted nor are gone (by group rank and global rank); ALREADY_EXISTS
  // if `key` is being collected already; UNAVAILABLE after Stop.
  Future<Votes> Collect(const std::string& key, std::vector<int> members,
                        std::vector<uint64_t> generations, int self, bool flag,
                        absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Global rank `from` (authenticated by the caller) votes `flag` in `key`
  // to this worker `self`. INVALID_ARGUMENT for a key no member could
  // send; PERMISSION_DENIED if `from` or `self` is not a member of its
  // group; RESOURCE_EXHAUSTED for an early vote whose key alone is over
  // kMaxEarlyBytesPerSender; a second vote of one member is ignored (the
  // first counts).
  absl::Status Vote(const std::string& key, int from, int self, bool flag)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A worker went down: completes the collections it was missing from.
  void Recheck() ABSL_LOCKS_EXCLUDED(mu_);

  // Fails every collection (UNAVAILABLE) and takes no more.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Early votes held, of every sender; of global rank `from`.
  size_t early_votes() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t early_votes(int from) const ABSL_LOCKS_EXCLUDED(mu_);

  // Fault injection for tests: the points of this worker's agreements
  // (elastic.cc) where it may stop as if it died there. kVote: before its
  // vote goes to `peer` (a global rank); kPropose: before it proposes its
  // result to the store; kDecided: once the store decided, before it
  // returns. `fault(point, peer)` (peer -1 but for kVote) returns true to
  // stop there: the agreement fails here (UNAVAILABLE) and sends nothing
  // more. It runs on the agreement's thread, outside any lock.
  enum class Point { kVote, kPropose, kDecided };
  using Fault = std::function<bool(Point point, int peer)>;
  void SetFaultForTesting(Fault fault) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether an agreement stops at `point` (false without a fault set).
  bool StopsAt(Point point, int peer = -1) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    Votes votes;
    // Set while this worker collects the key.
    std::vector<int> members;
    std::vector<uint64_t> generations;
    std::optional<Promise<Votes>> done;
    Timers::TimerId timer = 0;
  };
  // The members of entry `key` that neither voted nor are gone; empty if
  // complete.
  std::vector<int> Missing(const Entry& entry) const;
  // Completes `key` if it is collected and complete; returns what to
  // resolve (outside the lock).
  std::optional<std::pair<Promise<Votes>, Votes>> TakeIfComplete(
      const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Expire(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // A sender's early votes, oldest first.
  struct Early {
    struct Vote {
      std::string key;
      std::string group;  // GroupOfOp(key).
    };
    std::deque<Vote> votes;
    size_t bytes = 0;  // Of their keys.
  };
  // Records `from`'s early vote in `key`, then drops its own oldest while
  // over a bound.
  void AddEarlyLocked(int from, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `from`'s early vote at `at` (its entry too if it held no other).
  void DropEarlyLocked(int from, std::deque<Early::Vote>::iterator at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The votes of `key` are no longer early: it is collected here now.
  void ForgetEarlyLocked(const std::string& key, const Votes& votes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Timers* const timers_;
  const int world_size_;
  const std::function<bool(int, uint64_t)> is_gone_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Fault fault_ ABSL_GUARDED_BY(mu_);
  // By sender (global rank).
  absl::flat_hash_map<int, Early> early_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_VOTE_BOOK_H_
