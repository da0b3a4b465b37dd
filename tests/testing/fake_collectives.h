// A job's collectives in one process, over a network stepped by hand: each
// rank is a CollectiveContext over a FakeHost, and everything that would
// cross a process — a collective message (framed as the wire frames it,
// frames.h, and taken by the receiver's own Inbound), a control-plane call
// (a vote, a revoke, a probe: run by the callee's own Registry), work sent
// off the calling thread — waits in one queue until the test steps it.
// Time is a ManualClock; the job's store is a map. So a collective
// protocol runs deterministically,
// in an order the test chooses, and what each rank holds afterwards can be
// checked.
//
//   FakeCollectives job({.world_size = 4});
//   std::vector<Work<Tensor>> w;
//   for (int r = 0; r < 4; ++r) w.push_back(AllReduceAsync(job.world(r), t));
//   ASSERT_TRUE(job.Drain());          // every message delivered
//   EXPECT_TRUE(w[0].IsCompleted());
//   EXPECT_TRUE(job.Idle());           // nothing left behind
#ifndef FERRY_TESTS_TESTING_FAKE_COLLECTIVES_H_
#define FERRY_TESTS_TESTING_FAKE_COLLECTIVES_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectives/op/collective_context.h"
#include "collectives/op/process_group.h"
#include "collectives/transport/config.h"
#include "rpc/base/limits.h"
#include "rpc/membership/directory.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace testing {

class FakeCollectives {
 public:
  struct Options {
    int world_size = 2;
    CollectiveConfig config;
    Limits limits = DefaultLimits();
    // An op's timeout when its options give none.
    absl::Duration default_timeout = absl::Seconds(30);
    // 0: steps run in the order they were queued; else each step is picked
    // at random among the pending ones, from this seed (any order a real
    // network could deliver in: streams are independent).
    uint64_t shuffle_seed = 0;
  };
  // What one step carried (the log the protocol tests read).
  struct Delivery {
    enum class Kind { kMessage, kAbort, kCall, kTask };
    Kind kind;
    int from = -1;
    int to = -1;
    std::string what;  // Op key, or the function called.
    int step = 0;      // A message's step.
  };

  explicit FakeCollectives(Options options);
  // Stops every rank's collectives and drops what is still queued.
  ~FakeCollectives();

  FakeCollectives(const FakeCollectives&) = delete;
  FakeCollectives& operator=(const FakeCollectives&) = delete;

  int world_size() const { return options_.world_size; }
  CollectiveContext& at(int rank) { return *contexts_[rank]; }
  std::shared_ptr<CollectiveContext> shared(int rank) {
    return contexts_[rank];
  }
  ProcessGroup& world(int rank) { return at(rank).world(); }
  ManualTimers& timers() { return timers_; }

  // Runs one pending step; false if none is pending.
  bool Step();
  // Steps until nothing is pending; false if that took over `max_steps`
  // (a protocol that never settles).
  bool Drain(int max_steps = 1 << 20);
  size_t pending() const { return queue_.size(); }
  // Everything delivered so far, in order.
  const std::vector<Delivery>& log() const { return log_; }
  // The messages (not aborts) delivered so far from `from` (-1: anyone).
  int MessagesFrom(int from) const;

  // Rank `rank` dies for `why`: what it sent and what was sent to it is
  // dropped (sends to it fail, naming it), and every other rank learns of
  // it as from the membership (CollectiveContext::NodeDown).
  void Kill(int rank, absl::Status why);
  bool dead(int rank) const { return down_[rank].has_value(); }
  // Rank `rank`'s process is gone but nobody has been told: sends to it
  // fail as a broken connection does (UNAVAILABLE "Socket closed") until
  // Kill reports the death.
  void Crash(int rank) { unreachable_[rank] = true; }

  // Whether every live rank's mailbox holds nothing (no message kept for
  // an op that ended or never began).
  bool Idle() const;

 private:
  class Host;
  class Store;
  class Transport;
  struct Pending {
    Delivery delivery;
    std::function<void()> run;
  };

  void Enqueue(Delivery delivery, std::function<void()> run);
  std::optional<absl::Status> DownReason(int rank) const { return down_[rank]; }
  // Why a send to `rank` fails now, if it does.
  std::optional<absl::Status> SendFails(int rank) const;

  const Options options_;
  ManualClock clock_;
  ManualTimers timers_{&clock_};
  Directory directory_;
  std::vector<std::optional<absl::Status>> down_;
  std::vector<bool> unreachable_;  // Crashed: sends fail, none told.
  std::vector<std::shared_ptr<CollectiveContext>> contexts_;
  // The test's thread only: no lock.
  std::deque<Pending> queue_;
  std::vector<Delivery> log_;
  std::map<std::string, std::string> store_;
  std::mt19937_64 random_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_FAKE_COLLECTIVES_H_
