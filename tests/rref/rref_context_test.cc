// An owner's and a user's RRef context, wired by in-process fake owners
// (tests/testing/fake_owners.h: no gRPC server) on one manual clock: every
// message, lease, renewal round and sweep happens only when the test steps
// the timers, so each test is a fixed sequence of protocol steps — no
// sleeps, no waiting for threads. TearDown checks the owner table ends
// empty. (The same service over real gRPC: rref_test, rref_races_test.)
#include "rref/rref_context.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rpc/value/rref_base.h"
#include "rref/fork_codec.h"
#include "rref/rref.h"
#include "tests/testing/fake_owners.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::FakeOwners;
using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kLease = absl::Seconds(1);
constexpr absl::Duration kPeriod = absl::Milliseconds(250);  // kLease / 4.

class RRefContextTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(RRefOptions{.lease = kLease}); }

  void Start(RRefOptions options) {
    RRefContext::Host owner;
    owner.node = WorkerNode(1);
    owner.rank = 1;
    owner.name = "worker1";
    owner.directory = &directory_;
    owner.membership = &membership_;
    owner.timers = &timers_;
    owner.owners = owners_.ForNode(owner.node);
    owner_ = RRefContext::ForOwner(owner, options);
    owners_.AddOwner(1, owner_.get());
    RRefContext::Host user = owner;
    user.node = WorkerNode(0);
    user.rank = 0;
    user.name = "worker0";
    user.owners = owners_.ForNode(user.node);
    user.caller = owners_.CallerFor(user.node);
    user_ = RRefContext::ForUser(user, options);
  }

  // An RRef the owner holds, and a copy of it sent to the user (as a call
  // from the owner would), confirmed.
  std::pair<RRef, RRef> Share(int v) {
    absl::StatusOr<RRef> mine = owner_->Wrap(Value(v));
    EXPECT_OK(mine);
    absl::StatusOr<Value::RRefPtr> copy;
    {
      std::unique_ptr<RRefCodec> send = owner_->ForPeer(WorkerNode(0));
      absl::StatusOr<proto::RRefHandle> handle =
          send->Encode(mine->AsValue().as_rref());
      EXPECT_OK(handle);
      copy = user_->ForPeer(WorkerNode(1))->Decode(*handle);
      EXPECT_OK(copy);
      const int confirms = owners_.delivered("ConfirmFork");
      timers_.RunDue();
      EXPECT_EQ(owners_.delivered("ConfirmFork"), confirms + 1);
    }  // The call is over.
    absl::StatusOr<RRef> theirs = RRef::FromValue(Value(*copy));
    EXPECT_OK(theirs);
    return {*std::move(mine), *std::move(theirs)};
  }

  // One renewal period: the user's renewal (`chunks` messages) is applied.
  void Renew(int chunks = 1) {
    const int before = owners_.delivered("RenewLease");
    timers_.Advance(kPeriod);
    EXPECT_EQ(owners_.delivered("RenewLease"), before + chunks);
  }

  // A value worker1 computes for the user's remote() call, and the user's
  // copy of it (the creating call arrived: its fork is registered).
  std::pair<proto::RRefHandle, RRef> Computing() {
    RRefDescriptor d{user_->NewId(), user_->NewId(), "worker1", 1};
    const proto::RRefHandle handle = DescriptorToProto(d);
    EXPECT_OK(owner_->Begin(handle, WorkerNode(0)));
    absl::StatusOr<std::shared_ptr<const RRefState>> copy =
        user_->Adopt(d, Future<Done>::Ready(Done()));
    EXPECT_OK(copy);
    return {handle, RRef(*std::move(copy))};
  }

  void TearDown() override {
    owners_.Release();
    timers_.RunDue();
    user_->Stop();
    EXPECT_EQ(owner_->owner_stats().owned, 0) << "leaked";
    owner_->Stop();
    timers_.Stop();
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
  Membership membership_;
  Directory directory_{
      {WorkerInfo{.name = "worker0", .rank = 0, .address = "unused:1"},
       WorkerInfo{.name = "worker1", .rank = 1, .address = "unused:2"}}};
  FakeOwners owners_{&timers_};
  std::shared_ptr<RRefContext> owner_;
  std::shared_ptr<RRefContext> user_;
};

// A user that renews keeps its copy for many leases; once it goes silent,
// the owner drops its copy one lease later.
TEST_F(RRefContextTest, RenewalsKeepACopyUntilTheUserGoesSilent) {
  auto [mine, theirs] = Share(42);
  for (int i = 0; i < 20; ++i) Renew();  // Five leases.
  EXPECT_EQ(owner_->owner_stats().forks, 2);
  user_->Stop();  // Silent from now on (and its release is never sent).
  theirs = RRef();
  timers_.Advance(kLease / 2);
  EXPECT_EQ(owner_->owner_stats().forks, 2);
  timers_.Advance(kLease);
  EXPECT_EQ(owner_->owner_stats().forks, 1);
  mine = RRef();
}

// The user's confirm is late; its next renewal round lists the copy,
// which confirms it, and the confirm that arrives after changes nothing.
TEST_F(RRefContextTest, ARenewalRoundConfirmsWhatItLists) {
  ASSERT_OK_AND_ASSIGN(RRef mine, owner_->Wrap(Value(1)));
  owners_.Hold("ConfirmFork");
  Value::RRefPtr copy;
  {
    std::unique_ptr<RRefCodec> send = owner_->ForPeer(WorkerNode(0));
    ASSERT_OK_AND_ASSIGN(proto::RRefHandle handle,
                         send->Encode(mine.AsValue().as_rref()));
    ASSERT_OK_AND_ASSIGN(copy, user_->ForPeer(WorkerNode(1))->Decode(handle));
  }
  timers_.RunDue();
  EXPECT_EQ(owner_->owner_stats().unconfirmed, 1);
  EXPECT_EQ(user_->pending_messages(), 1);  // The confirm, undelivered.
  Renew();
  EXPECT_EQ(owner_->owner_stats().unconfirmed, 0);
  owners_.Release();
  EXPECT_EQ(user_->pending_messages(), 0);
  for (int i = 0; i < 8; ++i) Renew();  // Two leases: still there.
  EXPECT_EQ(owner_->owner_stats().forks, 2);
  copy.reset();
  timers_.RunDue();
  EXPECT_EQ(owners_.delivered("DeleteFork"), 1);
  EXPECT_EQ(owner_->owner_stats().forks, 1);
  mine = RRef();
}

// remote()'s caller drops its copy at once, and the delete reaches the
// owner before the creating call: the owner remembers it, and frees the
// value when the function's result comes.
TEST_F(RRefContextTest, ADeleteBeforeItsCreateFreesTheValueWhenItResolves) {
  RRefDescriptor d{user_->NewId(), user_->NewId(), "worker1", 1};
  Promise<Done> created;
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<const RRefState> copy,
                         user_->Adopt(d, created.future()));
  }  // Released: the delete goes out.
  timers_.RunDue();
  ASSERT_EQ(owners_.delivered("DeleteFork"), 1);
  const proto::RRefHandle handle = DescriptorToProto(d);
  ASSERT_OK(owner_->Begin(handle, WorkerNode(0)));  // The call arrives.
  EXPECT_EQ(owner_->owner_stats().owned, 1);        // Computing.
  EXPECT_EQ(owner_->owner_stats().forks, 0);
  EXPECT_OK(owner_->Finish(handle, Value(5)));
  EXPECT_EQ(owner_->owner_stats().owned, 0);
  created.Set(Done());
}

// to_here() of a value still being computed waits at the owner (parked,
// holding no thread) and is answered when the value comes.
TEST_F(RRefContextTest, AFetchWaitsAtTheOwnerForTheValue) {
  auto [handle, copy] = Computing();
  Future<Value> fetched = copy.ToHereAsync();
  timers_.RunDue();
  EXPECT_EQ(owners_.delivered("Fetch"), 1);
  EXPECT_FALSE(fetched.IsReady());
  EXPECT_EQ(owner_->owner_stats().parked, 1);
  EXPECT_OK(owner_->Finish(handle, Value(7)));
  ASSERT_TRUE(fetched.IsReady());
  ASSERT_OK_AND_ASSIGN(Value v, fetched.Wait(absl::ZeroDuration()));
  EXPECT_EQ(v.as_int(), 7);
  copy = RRef();
  timers_.RunDue();
}

// The fetch's own timeout ends it, naming the owner.
TEST_F(RRefContextTest, AFetchEndsAtItsTimeoutNamingTheOwner) {
  auto [handle, copy] = Computing();
  Future<Value> fetched = copy.ToHereAsync(absl::Milliseconds(100));
  timers_.Advance(absl::Milliseconds(99));
  EXPECT_FALSE(fetched.IsReady());
  timers_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(fetched.IsReady());
  EXPECT_THAT(fetched.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("worker1: to_here")));
  EXPECT_OK(owner_->Finish(handle, Value(7)));
  copy = RRef();
  timers_.RunDue();
}

// The owner dies while a fetch waits there: the fetch fails at once with
// the death (not at its timeout), and the user forgets the owner's values:
// nothing more is renewed or released there.
TEST_F(RRefContextTest, AFetchFailsAtOnceWhenItsOwnerDies) {
  auto [handle, copy] = Computing();
  Future<Value> fetched = copy.ToHereAsync();
  timers_.RunDue();
  ASSERT_FALSE(fetched.IsReady());
  membership_.MarkDown(WorkerNode(1), absl::UnavailableError("killed"));
  ASSERT_TRUE(fetched.IsReady());
  EXPECT_THAT(fetched.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("owner worker1 died")));
  copy = RRef();
  timers_.Advance(kLease);
  EXPECT_EQ(owners_.delivered("DeleteFork"), 0);
  EXPECT_EQ(owners_.delivered("RenewLease"), 0);
  EXPECT_EQ(user_->live_user_rrefs(), 0);
  EXPECT_OK(owner_->Finish(handle,
                           Value(7)));  // The (simulated) owner's own cleanup.
  timers_.Advance(2 * kLease);          // The silent holder's copy expires.
}

// remote(): the call creates the value at its owner, which keeps it as
// the RRef's; the caller's copy fetches it and its release frees it.
TEST_F(RRefContextTest, RemoteCreatesTheValueAtItsOwner) {
  owners_.Define(1, "twice", [](std::vector<Value> args) {
    return Future<Value>::Ready(Value(2 * args.at(0).as_int()));
  });
  ASSERT_OK_AND_ASSIGN(RRef r, user_->Remote("worker1", "twice", {Value(21)}));
  EXPECT_EQ(owner_->owner_stats().owned, 0);  // The call is on its way.
  timers_.RunDue();
  EXPECT_EQ(owners_.delivered("Call"), 1);
  EXPECT_EQ(owner_->owner_stats().owned, 1);
  Future<Value> fetched = r.ToHereAsync();
  timers_.RunDue();
  ASSERT_OK_AND_ASSIGN(Value v, fetched.Wait(absl::ZeroDuration()));
  EXPECT_EQ(v.as_int(), 42);
  r = RRef();
  timers_.RunDue();
  EXPECT_EQ(owner_->owner_stats().owned, 0);
}

// The function's error is the RRef's: to_here() reports it, naming the
// owner and the function.
TEST_F(RRefContextTest, ACreationsErrorIsTheRRefs) {
  owners_.Define(1, "fail", [](std::vector<Value>) {
    return Future<Value>::Ready(absl::InvalidArgumentError("no such shape"));
  });
  ASSERT_OK_AND_ASSIGN(RRef r, user_->Remote("worker1", "fail", {}));
  timers_.RunDue();
  Future<Value> fetched = r.ToHereAsync();
  timers_.RunDue();
  EXPECT_THAT(
      fetched.Wait(absl::ZeroDuration()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no such shape")));
  r = RRef();
  timers_.RunDue();
}

// remote() times out while its function still runs: the owner abandons
// the creator's copy (as for a cancelled call), so the value is freed when
// the function ends; to_here() reports the timeout.
TEST_F(RRefContextTest, ARemotePastItsTimeoutIsAbandonedAtItsOwner) {
  Promise<Value> result;
  owners_.Define(1, "slow",
                 [result](std::vector<Value>) { return result.future(); });
  ASSERT_OK_AND_ASSIGN(
      RRef r, user_->Remote("worker1", "slow", {}, absl::Milliseconds(100)));
  timers_.RunDue();
  EXPECT_EQ(owner_->owner_stats().owned, 1);  // Computing.
  EXPECT_EQ(owner_->owner_stats().forks, 1);
  timers_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(owner_->owner_stats().forks, 0);  // Abandoned.
  Future<Value> fetched = r.ToHereAsync();
  timers_.RunDue();
  EXPECT_THAT(fetched.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("worker1: slow: no reply within 100 ms")));
  result.Set(Value(1));  // The function ends; nobody holds the value.
  EXPECT_EQ(owner_->owner_stats().owned, 0);
  r = RRef();
  timers_.RunDue();
}

class ChunkedRRefContextTest : public RRefContextTest {
 protected:
  void SetUp() override {
    Start(RRefOptions{.lease = kLease, .lease_chunk_handles = 1});
  }
};

// Renewals of one copy a message: a round is three messages, and the owner
// reconciles only when all of a round arrived. The user's delete of one
// copy is lost; the next round drops it.
TEST_F(ChunkedRRefContextTest, RoundsOfManyChunksReconcileLostDeletes) {
  auto [a, a_copy] = Share(1);
  auto [b, b_copy] = Share(2);
  auto [c, c_copy] = Share(3);
  Renew(3);
  EXPECT_EQ(owner_->owner_stats().forks, 6);
  owners_.Hold("DeleteFork");
  a_copy = RRef();
  Renew(2);
  EXPECT_EQ(owner_->owner_stats().forks, 5);
  owners_.Drop();
  EXPECT_EQ(user_->pending_messages(), 0);  // Given up.
  for (int i = 0; i < 8; ++i) Renew(2);     // The others stay.
  EXPECT_EQ(owner_->owner_stats().forks, 5);
  b_copy = RRef();
  c_copy = RRef();
  timers_.RunDue();
  EXPECT_EQ(owners_.delivered("DeleteFork"), 2);
  EXPECT_EQ(owner_->owner_stats().forks, 3);
  a = RRef();
  b = RRef();
  c = RRef();
}

}  // namespace
}  // namespace ferry
