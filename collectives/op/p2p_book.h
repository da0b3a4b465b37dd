// The bookkeeping of a group's point-to-point messages on one rank
// (p2p.h): how messages are numbered, and the order receives match in.
//
// Messages from one rank to another with one tag are numbered 0, 1, … in
// the order sent (restarting in each new membership epoch of the pair),
// and a receive takes the next number from its source. An any-source
// receive waits for the next number from every other rank at once and
// takes whichever comes first; so that it never races a receive from one
// source for the same number, receives of one tag take turns: ones from a
// given source run together, an any-source one runs alone, each in the
// order called. A message an any-source receive got but did not take (it
// took another first) is kept here for the next receive of its number: at
// most kMaxKeptPerSource of one source at once (each is the next of its
// (source, tag); a program using that many tags at once with racing
// any-source receives is refused the next, which is dropped: the receive
// of its number then waits for it until its deadline).
//
// Thread-safe; `start` callbacks run outside the lock.
#ifndef FERRY_COLLECTIVES_OP_P2P_BOOK_H_
#define FERRY_COLLECTIVES_OP_P2P_BOOK_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rpc/value/value.h"

namespace ferry {

class P2pBook {
 public:
  using Start = absl::AnyInvocable<void() &&>;

  // The number of the next message to `peer` with `tag` in the pair's
  // `epoch` (counted as sent).
  uint64_t NextSend(int peer, int64_t tag, uint64_t epoch)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The number of the next message from `peer` with `tag` in `epoch`;
  // `take`: counted as received (else only looked at).
  uint64_t NextReceive(int peer, int64_t tag, uint64_t epoch, bool take)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `start` once this receive of `tag` may match (at once, or when
  // the receives it must follow called Finished).
  void Queue(int64_t tag, bool any_source, Start start)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A receive of `tag` that Queue started is over: starts those now
  // allowed.
  void Finished(int64_t tag, bool any_source) ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr size_t kMaxKeptPerSource = 1024;

  // Keeps the message of op key `key` from global rank `src` for the
  // receive that comes for it. RESOURCE_EXHAUSTED (nothing kept) if `src`
  // has kMaxKeptPerSource kept already.
  absl::Status Keep(int src, const std::string& key, Value message)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The message kept for `key`, handed out once.
  std::optional<Value> Take(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Count {
    uint64_t epoch = 0;
    uint64_t next = 0;
  };
  struct Turns {
    int running = 0;
    bool any_source = false;  // The one running is an any-source receive.
    std::deque<std::pair<bool, Start>> queued;  // (any_source, start)
  };
  static uint64_t Next(Count& count, uint64_t epoch, bool take);
  // Starts queued receives of `turns` while allowed; their starts go to
  // `out`.
  static void Admit(Turns& turns, std::deque<Start>* out);

  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<int, int64_t>, Count> sent_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<int, int64_t>, Count> received_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, Turns> turns_ ABSL_GUARDED_BY(mu_);
  // Op key → (source, message); and how many each source has there.
  absl::flat_hash_map<std::string, std::pair<int, Value>> kept_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, size_t> kept_by_source_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_P2P_BOOK_H_
