// Fuzz target: an agreement's vote book (collectives/op/vote_book.h) driven by
// what peers send (ferry.agree_vote: any key, any claimed rank, any flag)
// interleaved with this worker's own collections, deaths, replacements and
// time passing on the manual clock.
//
// Input: a script of steps; each step's first byte picks what happens:
//   0 a vote: key (length byte, then that many bytes, at most 48), the
//     sender's rank (a byte, in [-2, 10) against a world of 8), a flag;
//   1 a collection: key (as above), members (a byte: a bit mask of 8
//     ranks, this worker 0 always in), each member's expected generation
//     (a byte: a bit each, 0 or 1), a flag, a deadline in ms (a byte);
//   2 a rank (a byte % 8) dies; 3 a rank's generation goes up (replaced);
//   4 time passes (a byte, in ms).
// Properties: no crash; every collection settles by its deadline, and at
// once with UNAVAILABLE after Stop; a settled collection holds only votes
// of its members, this worker's own included; early votes never exceed
// kMaxEarlyPerSender per sender (issue 49: bounded per sender, whatever
// keys and groups the senders make up).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "collectives/op/vote_book.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

constexpr int kWorld = 8;

class Script {
 public:
  Script(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ >= end_; }
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  std::string Key() {
    size_t n = Byte() % 49;
    std::string key;
    while (n-- > 0 && p_ < end_) key.push_back(static_cast<char>(*p_++));
    return key;
  }

 private:
  const uint8_t* p_;
  const uint8_t* const end_;
};

struct Pending {
  Future<VoteBook::Votes> votes;
  std::vector<int> members;
  absl::Time deadline;
};

void Check(const Pending& c) {
  absl::StatusOr<VoteBook::Votes> v = c.votes.Wait(absl::ZeroDuration());
  if (!v.ok()) return;
  if (v->count(0) == 0) std::abort();  // This worker's own vote.
  for (const auto& [rank, flag] : *v) {
    bool member = false;
    for (int m : c.members) member = member || m == rank;
    if (!member) std::abort();
  }
}

void Run(Script& s) {
  testing::ManualClock clock;
  testing::ManualTimers timers(&clock);
  bool down[kWorld] = {};
  uint64_t generation[kWorld] = {};
  VoteBook book(&timers, kWorld, [&](int r, uint64_t expected) {
    return down[r] || generation[r] != expected;
  });
  std::vector<Pending> pending;
  for (int steps = 0; !s.done() && steps < 256; ++steps) {
    bool advanced = false, voted = false;
    switch (s.Byte() % 5) {
      case 0: {
        std::string key = s.Key();
        const int from = static_cast<int>(s.Byte() % 12) - 2;
        book.Vote(key, from, 0, s.Byte() & 1).IgnoreError();
        voted = true;
        break;
      }
      case 1: {
        std::string key = s.Key();
        const uint8_t mask = s.Byte() | 1;
        const uint8_t gens = s.Byte();
        std::vector<int> members;
        std::vector<uint64_t> expected;
        for (int r = 0; r < kWorld; ++r) {
          if ((mask >> r) & 1) {
            members.push_back(r);
            expected.push_back((gens >> r) & 1);
          }
        }
        const bool flag = s.Byte() & 1;
        const absl::Time deadline = clock.Now() + absl::Milliseconds(s.Byte());
        pending.push_back(
            {book.Collect(key, members, expected, 0, flag, deadline), members,
             deadline});
        break;
      }
      case 2:
        down[s.Byte() % kWorld] = true;
        book.Recheck();
        break;
      case 3:
        ++generation[s.Byte() % kWorld];
        book.Recheck();
        break;
      case 4:
        timers.Advance(absl::Milliseconds(s.Byte()));
        advanced = true;
        break;
    }
    // Early votes change only with a vote; readiness is checked as time
    // passes (a settled collection's votes never change, so checking each
    // once more at the end loses nothing). Checking every pending
    // collection at every step made the harness, not the book, the cost.
    if (voted) {
      for (int r = 0; r < kWorld; ++r) {
        if (book.early_votes(r) > VoteBook::kMaxEarlyPerSender) std::abort();
      }
    }
    if (advanced) {
      for (const Pending& c : pending) {
        // Timers due run as time passes (ManualTimers::Advance).
        if (clock.Now() >= c.deadline && !c.votes.IsReady()) std::abort();
      }
    }
  }
  book.Stop();
  for (const Pending& c : pending) {
    if (!c.votes.IsReady()) std::abort();
    Check(c);
  }
  timers.Stop();
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ferry::Script script(data, size);
  ferry::Run(script);
  return 0;
}
