#include "tests/testing/fake_membership.h"

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/base/timed_wait.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rpc/value/value.h"

namespace ferry::testing {
namespace {

using FollowCallbacks = MembershipBackend::FollowCallbacks;

// How long a delivery may keep another waiting (real time: a callback
// stuck this long is a bug in the code under test, not a slow machine).
constexpr absl::Duration kDeliveryBound = absl::Seconds(30);

std::string ClientName(uint64_t node) {
  return absl::StrCat("client", node - kFirstClientNode);
}

// One node following the job. The hub queues its events under the hub's
// lock, so each node sees them in the order the hub decided them; they run
// later, outside every lock, in that order, one at a time.
class Follower {
 public:
  using Event = std::function<void(Membership&, const FollowCallbacks&)>;

  Follower(uint64_t node, Membership* membership, FollowCallbacks callbacks)
      : node_(node),
        membership_(membership),
        callbacks_(std::move(callbacks)) {}

  uint64_t node() const { return node_; }

  // Only queues: safe under the hub's lock.
  void Post(Event event) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!stopped_) queue_.push_back(std::move(event));
  }

  // Runs what is queued, in order; when another thread is delivering to
  // this node, first waits (bounded) for it, so that what the caller
  // posted has run when Drain returns.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!AwaitIdle() || stopped_) return;
    draining_ = true;
    drainer_ = std::this_thread::get_id();
    while (!stopped_ && !queue_.empty()) {
      Event event = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      event(*membership_, callbacks_);
      mu_.Lock();
    }
    draining_ = false;
    idle_.SignalAll();
  }

  // No event runs once it returns (except on the thread delivering, when
  // a callback stops its own node).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    queue_.clear();
    AwaitIdle();
  }

 private:
  // Whether no other thread delivers (waited for at most kDeliveryBound).
  bool AwaitIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (draining_ && drainer_ == std::this_thread::get_id()) return false;
    const absl::Time give_up = absl::Now() + kDeliveryBound;
    while (draining_) {
      if (idle_.WaitWithDeadline(&mu_, give_up)) return !draining_;
    }
    return true;
  }

  const uint64_t node_;
  Membership* const membership_;
  const FollowCallbacks callbacks_;
  absl::Mutex mu_;
  absl::CondVar idle_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id drainer_ ABSL_GUARDED_BY(mu_);
};

void DrainAll(const std::vector<std::shared_ptr<Follower>>& followers) {
  for (const auto& f : followers) f->Drain();
}

void SetAll(const std::vector<Promise<Done>>& promises) {
  for (const Promise<Done>& p : promises) p.Set(Done());
}

}  // namespace

struct FakeMembership::Hub {
  explicit Hub(int world) : world_size(world), slots(world) {}

  struct Slot {
    std::optional<WorkerInfo> info;  // Unset until its first join.
    uint64_t incarnation = 0;
    std::optional<absl::Status> gone;  // Why it died or left.
    bool live() const { return info.has_value() && !gone.has_value(); }
  };
  struct Barrier {
    std::set<int> arrived;
    bool done = false;
    Promise<Done> reached;
  };

  // Queues `event` for every follower but `except`'s (all of them when
  // `except` is unset); those to drain.
  std::vector<std::shared_ptr<Follower>> PostAll(const Follower::Event& event,
                                                 std::optional<uint64_t> except)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::shared_ptr<Follower>> posted;
    for (const auto& f : followers) {
      if (except.has_value() && f->node() == *except) continue;
      f->Post(event);
      posted.push_back(f);
    }
    return posted;
  }

  Directory DirectoryLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<WorkerInfo> workers;
    for (const Slot& s : slots)
      workers.push_back(s.info.value_or(WorkerInfo{}));
    return Directory(std::move(workers));
  }

  // The ranks not joined yet, as "worker1, worker3".
  std::string Unjoined() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::string> names;
    for (int r = 0; r < world_size; ++r) {
      if (!slots[r].info.has_value())
        names.push_back(absl::StrCat("worker", r));
    }
    return absl::StrJoin(names, ", ");
  }

  // The live ranks that have not reached barrier `name`.
  std::string AwaitedAt(const std::string& name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::string> names;
    auto b = barriers.find(name);
    for (int r = 0; r < world_size; ++r) {
      if (slots[r].live() &&
          (b == barriers.end() || b->second.arrived.count(r) == 0)) {
        names.push_back(absl::StrCat("worker", r));
      }
    }
    return absl::StrJoin(names, ", ");
  }

  // Marks done the barriers every live worker reached: their promises, to
  // set once the lock is released.
  std::vector<Promise<Done>> DueBarriers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<Promise<Done>> due;
    for (auto& [name, b] : barriers) {
      if (b.done) continue;
      bool all = true;
      for (int r = 0; r < world_size && all; ++r) {
        all = !slots[r].live() || b.arrived.count(r) > 0;
      }
      if (!all) continue;
      b.done = true;
      due.push_back(b.reached);
    }
    return due;
  }

  const int world_size;
  Promise<Done> formed;  // Set once every rank joined.
  mutable absl::Mutex mu;
  std::vector<Slot> slots ABSL_GUARDED_BY(mu);
  bool has_formed ABSL_GUARDED_BY(mu) = false;
  uint64_t next_client ABSL_GUARDED_BY(mu) = kFirstClientNode;
  std::vector<std::pair<uint64_t, std::string>> client_keys ABSL_GUARDED_BY(mu);
  std::map<uint64_t, absl::Status> clients_gone ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<Follower>> followers ABSL_GUARDED_BY(mu);
  std::map<std::string, Barrier> barriers ABSL_GUARDED_BY(mu);
};

namespace {

using Hub = FakeMembership::Hub;

class FakeBackend final : public MembershipBackend {
 public:
  FakeBackend(std::shared_ptr<Hub> hub, Timers* timers)
      : hub_(std::move(hub)), timers_(timers) {}
  ~FakeBackend() override { Stop(); }

  absl::StatusOr<Directory> Join(const JoinSpec& spec,
                                 absl::Duration timeout) override {
    const absl::Time deadline = timers_->clock()->Now() + timeout;
    const int rank = spec.self.rank;
    if (spec.world_size != hub_->world_size || rank < 0 ||
        rank >= hub_->world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.self.name, " asks for rank ", rank, " of a job of ",
          spec.world_size, "; this job has ", hub_->world_size, " ranks"));
    }
    WorkerInfo info = spec.self;
    std::vector<std::shared_ptr<Follower>> told;
    std::vector<Promise<Done>> due;
    bool replacement = false, formed_now = false;
    {
      absl::MutexLock lock(&hub_->mu);
      Hub::Slot& slot = hub_->slots[rank];
      if (slot.live()) {
        return absl::AlreadyExistsError(
            absl::StrCat("rank ", rank, " is held by a live worker (",
                         slot.info->name, " at ", slot.info->address, ")"));
      }
      info.generation = slot.info.has_value() ? slot.info->generation + 1 : 0;
      replacement = hub_->has_formed;
      slot.info = info;
      slot.incarnation = spec.incarnation;
      slot.gone.reset();
      if (replacement) {
        // Announced before it is revived, as the real backends do.
        told = hub_->PostAll(
            [info, incarnation = spec.incarnation](Membership& m,
                                                   const FollowCallbacks& c) {
              if (c.on_rejoined) c.on_rejoined(info, incarnation);
              m.Revive(WorkerNode(info.rank));
            },
            WorkerNode(rank));
      } else {
        bool all = true;
        for (const Hub::Slot& s : hub_->slots) all = all && s.info.has_value();
        formed_now = hub_->has_formed = all;
      }
      due = hub_->DueBarriers();
    }
    SetNode(WorkerNode(rank), spec.incarnation);
    if (formed_now) hub_->formed.Set(Done());
    SetAll(due);
    DrainAll(told);
    absl::Status formed = AwaitFormed(deadline);
    absl::MutexLock lock(&hub_->mu);
    if (!formed.ok()) {
      // Withdrawn, so that the worker may try again.
      Hub::Slot& slot = hub_->slots[rank];
      if (!hub_->has_formed && slot.incarnation == spec.incarnation) {
        slot.info.reset();
      }
      return formed;
    }
    return hub_->DirectoryLocked();
  }

  absl::StatusOr<ClientRegistration> RegisterClient(
      const std::string& description, const std::string& public_key,
      absl::Duration timeout) override {
    (void)description;
    absl::Status formed = AwaitFormed(timers_->clock()->Now() + timeout);
    if (!formed.ok()) return formed;
    ClientRegistration registered;
    std::vector<std::shared_ptr<Follower>> told;
    {
      absl::MutexLock lock(&hub_->mu);
      registered.node = hub_->next_client++;
      registered.directory = hub_->DirectoryLocked();
      hub_->client_keys.emplace_back(registered.node, public_key);
      told = hub_->PostAll(
          [node = registered.node, public_key](Membership&,
                                               const FollowCallbacks& c) {
            if (c.on_client) c.on_client(node, public_key);
          },
          std::nullopt);
    }
    SetNode(registered.node, 0);
    DrainAll(told);
    return registered;
  }

  void Follow(Membership* membership, FollowCallbacks callbacks) override {
    const uint64_t me = node().value_or(0);
    auto follower =
        std::make_shared<Follower>(me, membership, std::move(callbacks));
    {
      absl::MutexLock lock(&hub_->mu);
      // What happened before this node followed, queued first.
      for (int r = 0; r < hub_->world_size; ++r) {
        const Hub::Slot& slot = hub_->slots[r];
        if (!slot.gone.has_value() || WorkerNode(r) == me) continue;
        follower->Post([node = WorkerNode(r), why = *slot.gone](
                           Membership& m, const FollowCallbacks&) {
          m.MarkDown(node, why);
        });
      }
      for (const auto& [node, why] : hub_->clients_gone) {
        follower->Post(
            [node = node, why = why](Membership& m, const FollowCallbacks&) {
              m.MarkDown(node, why);
            });
      }
      for (const auto& [node, key] : hub_->client_keys) {
        follower->Post(
            [node = node, key = key](Membership&, const FollowCallbacks& c) {
              if (c.on_client) c.on_client(node, key);
            });
      }
      hub_->followers.push_back(follower);
    }
    {
      absl::MutexLock lock(&mu_);
      follower_ = follower;
    }
    follower->Drain();
  }

  absl::Status Barrier(const std::string& name,
                       absl::Duration timeout) override {
    const absl::Time deadline = timers_->clock()->Now() + timeout;
    const std::optional<uint64_t> me = node();
    if (!me.has_value() || !IsWorkerNode(*me)) {
      return absl::FailedPreconditionError(
          absl::StrCat("barrier ", name, ": only joined workers wait at one"));
    }
    Future<Done> reached;
    std::vector<Promise<Done>> due;
    {
      absl::MutexLock lock(&hub_->mu);
      Hub::Barrier& b = hub_->barriers[name];
      b.arrived.insert(static_cast<int>(*me));
      due = hub_->DueBarriers();
      reached = b.reached.future();
    }
    SetAll(due);
    if (AwaitUntil(*timers_, reached, deadline).ok()) return absl::OkStatus();
    absl::MutexLock lock(&hub_->mu);
    return absl::DeadlineExceededError(absl::StrCat(
        "barrier ", name, ": waiting for ", hub_->AwaitedAt(name)));
  }

  absl::Status Leave(absl::Duration timeout) override {
    (void)timeout;  // Nothing to wait for: the hub is in this process.
    const std::optional<uint64_t> me = node();
    std::vector<std::shared_ptr<Follower>> told;
    std::vector<Promise<Done>> due;
    if (me.has_value()) {
      absl::MutexLock lock(&hub_->mu);
      std::optional<absl::Status> why;
      if (IsWorkerNode(*me)) {
        Hub::Slot& slot = hub_->slots[*me];
        // A newer incarnation holds the rank: this one is long gone.
        if (slot.live() && slot.incarnation == incarnation()) {
          why = absl::UnavailableError(
              absl::StrCat(slot.info->name, " left the job"));
          slot.gone = why;
        }
      } else {
        why = absl::UnavailableError(
            absl::StrCat(ClientName(*me), " left the job"));
        hub_->clients_gone.emplace(*me, *why);
      }
      if (why.has_value()) {
        told = hub_->PostAll(
            [node = *me, why = *why](Membership& m, const FollowCallbacks&) {
              m.MarkDown(node, why);
            },
            *me);
        due = hub_->DueBarriers();
      }
    }
    SetAll(due);
    DrainAll(told);
    Stop();
    return absl::OkStatus();
  }

  void Stop() override {
    std::shared_ptr<Follower> follower;
    {
      absl::MutexLock lock(&mu_);
      follower = std::move(follower_);
    }
    if (follower == nullptr) return;
    {
      absl::MutexLock lock(&hub_->mu);
      std::erase(hub_->followers, follower);
    }
    follower->Stop();
  }

  bool rank0_is_master() const override { return false; }
  bool rank_is_assignable() const override { return false; }
  std::string description() const override { return "the fake membership"; }

 private:
  void SetNode(uint64_t node, uint64_t incarnation) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    node_ = node;
    incarnation_ = incarnation;
  }
  std::optional<uint64_t> node() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return node_;
  }
  uint64_t incarnation() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return incarnation_;
  }

  // OK once every rank joined; DEADLINE_EXCEEDED naming those missing.
  absl::Status AwaitFormed(absl::Time deadline) {
    if (AwaitUntil(*timers_, hub_->formed.future(), deadline).ok()) {
      return absl::OkStatus();
    }
    absl::MutexLock lock(&hub_->mu);
    return absl::DeadlineExceededError(
        absl::StrCat("the job did not form by the deadline: waiting for ",
                     hub_->Unjoined(), " (", description(), ")"));
  }

  const std::shared_ptr<Hub> hub_;
  Timers* const timers_;
  mutable absl::Mutex mu_;
  std::optional<uint64_t> node_ ABSL_GUARDED_BY(mu_);
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Follower> follower_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

FakeMembership::FakeMembership(int world_size)
    : hub_(std::make_shared<Hub>(world_size)) {}

FakeMembership::~FakeMembership() = default;

FakeMembership::Factory FakeMembership::Backend() {
  return [hub = hub_](Timers* timers)
             -> absl::StatusOr<std::unique_ptr<MembershipBackend>> {
    return std::make_unique<FakeBackend>(hub, timers);
  };
}

absl::Status FakeMembership::Kill(int rank, const std::string& why) {
  if (rank < 0 || rank >= hub_->world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("no rank ", rank, " in a job of ", hub_->world_size));
  }
  std::vector<std::shared_ptr<Follower>> told;
  std::vector<Promise<Done>> due;
  {
    absl::MutexLock lock(&hub_->mu);
    Hub::Slot& slot = hub_->slots[rank];
    if (!slot.live()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no live worker holds rank ", rank));
    }
    const absl::Status dead = absl::UnavailableError(
        absl::StrCat(slot.info->name, " died (", why, ")"));
    slot.gone = dead;
    const uint64_t node = WorkerNode(rank);
    told = hub_->PostAll(
        [node, dead](Membership& m, const FollowCallbacks&) {
          m.MarkDown(node, dead);
        },
        node);
    for (const auto& f : hub_->followers) {
      if (f->node() != node) continue;
      f->Post([dead](Membership&, const FollowCallbacks& c) {
        if (c.on_fenced) c.on_fenced(dead);
      });
      told.push_back(f);
    }
    due = hub_->DueBarriers();
  }
  SetAll(due);
  DrainAll(told);
  return absl::OkStatus();
}

int FakeMembership::clients() const {
  absl::MutexLock lock(&hub_->mu);
  return static_cast<int>(hub_->next_client - kFirstClientNode);
}

}  // namespace ferry::testing
