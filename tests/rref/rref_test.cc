// In-process multi-worker tests of RRefs: creation, every fork case,
// proxies, timeouts, and that owner tables end empty.
#include "rref/rref.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/testing/await.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/membership_waits.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(20);

Tensor F32(std::vector<float> v) { return Tensor::FromVector<float>(v); }
Value Ones2() { return Value(Value::List{Value(int64_t{2})}); }

class RRefTest : public ::testing::Test {
 protected:
  void StartJob(int n, LocalJob::Options options = {}) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n, options);
    ASSERT_OK(job);
    job_ = *std::move(job);
  }
  WorkerImpl& worker(int r) { return job_->worker(r); }

  // Every owner table is empty once all copies are released (deletes are
  // asynchronous: wait, bounded).
  void ExpectNoLeaks() {
    for (int r = 0; r < job_->size(); ++r) {
      if (worker(r).rpc().stopped()) continue;  // A dead owner keeps its table.
      AwaitTrue(
          [&] {
            return worker(r).rrefs().owner_stats().owned == 0 &&
                   worker(r).rrefs().live_user_rrefs() == 0;
          },
          kWait);
      EXPECT_EQ(worker(r).rrefs().owner_stats().owned, 0) << "worker" << r;
      EXPECT_EQ(worker(r).rrefs().live_user_rrefs(), 0) << "worker" << r;
    }
  }

  void TearDown() override {
    if (job_ != nullptr && !::testing::Test::HasFailure()) ExpectNoLeaks();
  }

  // Whether worker `rank` owns `n` values within kWait (deletes and
  // creations are asynchronous).
  bool AwaitOwned(int rank, int64_t n) {
    return AwaitTrue(
        [&] { return worker(rank).rrefs().owner_stats().owned == n; }, kWait);
  }

  // Stepped by hand in the tests that put workers on them (declared before
  // the job, so they outlive it).
  ManualClock clock_;
  ManualTimers timers_{&clock_};
  std::unique_ptr<LocalJob> job_;
};

// The seed: rref1 = remote(worker1, add, (ones(2), 3)); rref2 = … +1;
// x = rref1.to_here() + rref2.to_here().
TEST_F(RRefTest, SeedExample) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(Value ones,
                       worker(0).rpc().RpcSync("worker1", "ones", {Ones2()}));
  {
    ASSERT_OK_AND_ASSIGN(RRef r1,
                         worker(0).rrefs().Remote("worker1", "add", {ones, 3}));
    ASSERT_OK_AND_ASSIGN(RRef r2,
                         worker(0).rrefs().Remote("worker1", "add", {ones, 1}));
    EXPECT_EQ(r1.owner_name(), "worker1");
    EXPECT_FALSE(r1.IsOwner());
    ASSERT_OK_AND_ASSIGN(Value a, r1.ToHere());
    ASSERT_OK_AND_ASSIGN(Value b, r2.ToHere());
    ASSERT_OK_AND_ASSIGN(Value x,
                         worker(0).rpc().RpcSync("worker0", "add", {a, b}));
    EXPECT_EQ(x, Value(F32({6, 6})));
    EXPECT_TRUE(r1.ConfirmedByOwner());
    EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 2);
  }
}

TEST_F(RRefTest, LocalValueOnlyOnOwner) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r, worker(0).rrefs().Wrap(Value(F32({1}))));
  EXPECT_TRUE(r.IsOwner());
  ASSERT_OK_AND_ASSIGN(Value v, r.LocalValue());
  EXPECT_EQ(v, Value(F32({1})));
  ASSERT_OK_AND_ASSIGN(RRef remote,
                       worker(0).rrefs().Remote("worker1", "echo", {1}));
  EXPECT_THAT(remote.LocalValue(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("owned by worker1")));
}

// user → user: worker0 holds an RRef owned by worker1 and passes it to
// worker2, whose to_here fetches from the owner.
TEST_F(RRefTest, PassedToThirdWorker) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "arange", {4}));
  ASSERT_OK_AND_ASSIGN(
      Value v, worker(0).rpc().RpcSync("worker2", "to_here", {r.AsValue()}));
  EXPECT_EQ(v, Value(Tensor::FromVector<int64_t>({0, 1, 2, 3})));
}

// owner → user: the owner sends its own RRef to another worker.
TEST_F(RRefTest, OwnerSendsToUser) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r, worker(1).rrefs().Wrap(Value("mine")));
  ASSERT_OK_AND_ASSIGN(
      Value v, worker(1).rpc().RpcSync("worker0", "to_here", {r.AsValue()}));
  EXPECT_EQ(v, Value("mine"));
}

// user → owner: the RRef goes back to its owner (lent, no new fork).
TEST_F(RRefTest, UserSendsToOwner) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "echo", {7}));
  ASSERT_OK(r.ToHere());
  ASSERT_OK_AND_ASSIGN(
      Value v, worker(0).rpc().RpcSync("worker1", "to_here", {r.AsValue()}));
  EXPECT_EQ(v, Value(7));
}

// A fresh, unconfirmed RRef passed on at once: the owner parks the fork
// until the creating call arrives.
TEST_F(RRefTest, UnconfirmedRRefPassedOnAtOnce) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "sleep_ms", {100}));
  ASSERT_OK_AND_ASSIGN(
      Value v, worker(0).rpc().RpcSync("worker2", "to_here", {r.AsValue()}));
  EXPECT_EQ(v, Value());
}

// The same with the creator its own owner: a remote() to this very worker,
// passed on before its call reached this worker's call service (the owner
// table had no entry yet: the copy was refused as "gone").
TEST_F(RRefTest, UnconfirmedRRefToSelfPassedOnAtOnce) {
  StartJob(2);
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         worker(0).rrefs().Remote("worker0", "add", {1, i}));
    ASSERT_OK_AND_ASSIGN(
        Value v, worker(0).rpc().RpcSync("worker1", "to_here", {r.AsValue()}));
    EXPECT_EQ(v, Value(int64_t{1 + i}));
  }
  // A creation that fails fails the call carrying the copy at once, not at
  // its timeout.
  ASSERT_OK_AND_ASSIGN(RRef bad,
                       worker(0).rrefs().Remote("worker0", "no_such_fn", {}));
  EXPECT_THAT(worker(0).rpc().RpcSync("worker1", "to_here", {bad.AsValue()}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no_such_fn")));
}

TEST_F(RRefTest, NestedRRefsInListsAndMaps) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(RRef a,
                       worker(0).rrefs().Remote("worker1", "echo", {1}));
  ASSERT_OK_AND_ASSIGN(RRef b,
                       worker(0).rrefs().Remote("worker2", "echo", {2}));
  Value nested(Value::Map{{"refs", Value::List{a.AsValue(), b.AsValue()}}});
  ASSERT_OK_AND_ASSIGN(Value back,
                       worker(0).rpc().RpcSync("worker1", "echo", {nested}));
  const Value& refs = *back.Find("refs");
  ASSERT_OK_AND_ASSIGN(RRef a2, RRef::FromValue(refs.as_list()[0]));
  ASSERT_OK_AND_ASSIGN(Value one, a2.ToHere());
  EXPECT_EQ(one, Value(1));
}

TEST_F(RRefTest, ProxiesRunOnTheOwner) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "arange", {3}));
  ASSERT_OK_AND_ASSIGN(Value sum, r.RpcSync("sum"));
  EXPECT_EQ(sum, Value(Tensor::Scalar<int64_t>(3)));
  ASSERT_OK_AND_ASSIGN(Value plus,
                       r.RpcAsync("add", {10}).Wait(absl::Seconds(30)));
  EXPECT_EQ(plus, Value(Tensor::FromVector<int64_t>({10, 11, 12})));
  ASSERT_OK_AND_ASSIGN(RRef doubled, r.Remote("mul", {2}));
  EXPECT_EQ(doubled.owner_name(), "worker1");
  ASSERT_OK_AND_ASSIGN(Value d, doubled.ToHere());
  EXPECT_EQ(d, Value(Tensor::FromVector<int64_t>({0, 2, 4})));
}

TEST_F(RRefTest, FailedCreationSurfacesOnToHere) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "fail", {"boom"}));
  EXPECT_THAT(r.ToHere(),
              StatusIs(absl::StatusCode::kUnknown, HasSubstr("boom")));
  EXPECT_FALSE(r.ConfirmedByOwner());
}

// remote()'s timeout covers creation; the late value is freed on the owner.
TEST_F(RRefTest, RemoteTimeoutLeavesNoValueBehind) {
  StartJob(2);
  {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         worker(0).rrefs().Remote("worker1", "sleep_ms", {300},
                                                  absl::Milliseconds(50)));
    EXPECT_THAT(r.ToHere(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  }
  // ExpectNoLeaks() (TearDown) waits for the late value to be produced and
  // freed.
}

TEST_F(RRefTest, ToHereHasItsOwnTimeout) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "sleep_ms", {500}));
  EXPECT_THAT(r.ToHere(absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_OK(r.ToHere());
}

TEST_F(RRefTest, ClientHoldsAndPassesRRefs) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(auto client, job_->Connect());
  {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         client->rrefs().Remote("worker1", "arange", {2}));
    ASSERT_OK_AND_ASSIGN(Value v, r.ToHere());
    EXPECT_EQ(v, Value(Tensor::FromVector<int64_t>({0, 1})));
    ASSERT_OK_AND_ASSIGN(
        Value w, client->rpc().RpcSync("worker0", "to_here", {r.AsValue()}));
    EXPECT_EQ(w, v);
  }
  client->Close();
}

TEST_F(RRefTest, JsonParsedRRefCannotBeSent) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(Value fake,
                       ParseJson(R"({"$rref":"w1.5","owner":"worker1"})"));
  EXPECT_THAT(worker(0).rpc().RpcSync("worker1", "to_here", {fake}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a live reference")));
}

TEST_F(RRefTest, ListOwnedShowsForks) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "echo", {1}));
  ASSERT_OK(r.ToHere());
  // Owner tables are for clients (ferryctl) to list, not other workers.
  EXPECT_THAT(
      worker(2).rrefs().ListOwned(1, absl::Seconds(10)).Wait(absl::Seconds(20)),
      StatusIs(absl::StatusCode::kPermissionDenied,
               HasSubstr("worker1: ListOwned is for clients only; the "
                         "caller is worker2")));
  ASSERT_OK_AND_ASSIGN(auto client, job_->Connect());
  ASSERT_OK_AND_ASSIGN(
      auto rows,
      client->rrefs().ListOwned(1, absl::Seconds(10)).Wait(absl::Seconds(20)));
  client->Close();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id(), GlobalIdString(r.id()));
  EXPECT_EQ(rows[0].creator(), "worker0");
  EXPECT_EQ(rows[0].state(), "ready");
  ASSERT_EQ(rows[0].forks_size(), 1);
  EXPECT_EQ(rows[0].forks(0).holder_name(), "worker0");
}

// Waits (bounded, on `worker`'s membership events) until it knows worker
// `rank` is gone.
void AwaitDown(WorkerImpl& worker, int rank) {
  ASSERT_TRUE(::ferry::testing::AwaitGone(worker.rpc().events(), rank,
                                          absl::Seconds(20)))
      << worker.rpc().name() << " never heard that worker" << rank
      << " is gone";
  ASSERT_TRUE(worker.rpc().membership().DownReason(rank).has_value());
}

TEST_F(RRefTest, OwnerDeathFailsEveryCopyAtOnce) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker2", "arange", {5}));
  ASSERT_OK(r.ToHere());
  // A fetch still waiting when the owner dies fails too.
  ASSERT_OK_AND_ASSIGN(
      RRef slow, worker(0).rrefs().Remote("worker2", "sleep_ms", {60000}));
  Future<Value> pending = slow.ToHereAsync();
  worker(2).Stop();
  EXPECT_THAT(pending.Wait(absl::Seconds(20)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  ASSERT_NO_FATAL_FAILURE(AwaitDown(worker(0), 2));
  EXPECT_THAT(r.ToHere(), StatusIs(absl::StatusCode::kUnavailable,
                                   HasSubstr("owner worker2 died")));
}

// A replacement of the owner (a new process for its rank) never has the
// old one's values: copies made before keep reporting the owner died — on
// fetch, on calls through them, when passed on — while new RRefs on the
// replacement work.
TEST_F(RRefTest, AReplacedOwnersCopiesReportItDied) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker2", "arange", {5}));
  ASSERT_OK(r.ToHere());
  worker(2).Stop();
  ASSERT_NO_FATAL_FAILURE(AwaitDown(worker(0), 2));
  ASSERT_NO_FATAL_FAILURE(AwaitDown(worker(1), 2));
  ASSERT_OK(job_->Replace(2));
  EXPECT_FALSE(worker(0).rpc().membership().DownReason(2).has_value());
  EXPECT_THAT(r.ToHere(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("owner worker2 died (a new incarnation")));
  EXPECT_THAT(worker(0).rpc().RpcSync("worker1", "to_here", {r.AsValue()}),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("owner worker2 died")));
  ASSERT_OK_AND_ASSIGN(RRef fresh,
                       worker(0).rrefs().Remote("worker2", "arange", {3}));
  ASSERT_OK_AND_ASSIGN(Value v, fresh.ToHere());
  EXPECT_EQ(ToJson(v), R"({"dtype":"int64","data":[0,1,2]})");
}

// A replacement numbers its RRefs afresh under the same node id, while the
// owners still keep the old incarnation's tombstones: its ids must not
// meet them. Worker2 creates an RRef on worker1 and dies; worker1 frees
// the value (its only copy was worker2's) and keeps its id as a tombstone.
// The replacement's first remote() on worker1 is created (counting its ids
// from 1 again, it would have been refused as already freed).
TEST_F(RRefTest, AReplacementsIdsDoNotMeetItsPredecessors) {
  StartJob(3);
  GlobalId old_id;
  {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         worker(2).rrefs().Remote("worker1", "arange", {2}));
    ASSERT_OK(r.ToHere());
    old_id = r.id();
    worker(2).Stop();  // Dies holding its copy.
  }
  ASSERT_NO_FATAL_FAILURE(AwaitDown(worker(1), 2));
  ASSERT_NO_FATAL_FAILURE(AwaitDown(worker(0), 2));
  ASSERT_TRUE(AwaitOwned(1, 0));
  ASSERT_OK(job_->Replace(2));
  ASSERT_OK_AND_ASSIGN(RRef again,
                       worker(2).rrefs().Remote("worker1", "arange", {2}));
  EXPECT_EQ(again.id().node, old_id.node);
  EXPECT_NE(again.id(), old_id);
  EXPECT_OK(again.ToHere());
}

// A user that dies without releasing: the owner learns of the death from
// membership and drops its copies (the lease would, later, anyway).
TEST_F(RRefTest, DeadUsersCopiesAreReclaimed) {
  StartJob(3);
  std::vector<RRef> held;
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         worker(2).rrefs().Remote("worker1", "echo", {i}));
    held.push_back(r);
  }
  ASSERT_OK(held.back().ToHere());
  ASSERT_TRUE(AwaitOwned(1, 20));
  worker(2).Stop();  // Dies: no releases sent.
  EXPECT_TRUE(AwaitOwned(1, 0));
  held.clear();  // Their releases go nowhere: the node stopped.
}

// Without membership news (a partition), the lease alone reclaims. On
// hand-stepped time: the client holds worker1's value and renews it every
// lease/4; it is never declared dead (the job is in manual-time mode).
TEST_F(RRefTest, LeaseReclaimsCopiesOfASilentClient) {
  static constexpr absl::Duration kLease = absl::Milliseconds(400);
  StartJob(2, {.configure = [](WorkerConfig& o) { o.rref.lease = kLease; },
               .timers = &timers_});
  ClientLayers layers;
  layers.rref.lease = kLease;
  ASSERT_OK_AND_ASSIGN(auto client, job_->Connect({}, layers));
  ASSERT_OK_AND_ASSIGN(RRef r, client->rrefs().Remote("worker1", "echo", {1}));
  ASSERT_OK(r.ToHere());
  // Renewals keep it alive over three leases: each step moves time on by
  // one renewal period and waits until the owner took that round (a round
  // walks the holder's one fork there; its sweeps walk none of a holder
  // whose lease holds).
  for (int round = 0; round < 12; ++round) {
    const int64_t walked = worker(1).rrefs().owner_stats().forks_walked;
    timers_.Advance(kLease / 4);
    ASSERT_TRUE(AwaitTrue(
        [&] { return worker(1).rrefs().owner_stats().forks_walked > walked; },
        kWait))
        << "round " << round << " never reached the owner";
  }
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 1);
  // The client goes silent but is not declared dead: it stops renewing.
  client->rrefs().Stop();
  timers_.Advance(kLease);
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 1) << "before its lease";
  // The owner's next sweep (every lease/8, run within Advance) drops it.
  timers_.Advance(kLease / 4);
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
}

TEST_F(RRefTest, LiveRRefLimitIsResourceExhausted) {
  StartJob(2,
           {.configure = [](WorkerConfig& o) { o.rref.max_live_rrefs = 3; }});
  std::vector<RRef> held;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         worker(0).rrefs().Remote("worker1", "echo", {i}));
    held.push_back(r);
  }
  EXPECT_THAT(
      worker(0).rrefs().Remote("worker1", "echo", {9}),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("limit 3")));
  held.pop_back();
  EXPECT_OK(worker(0).rrefs().Remote("worker1", "echo", {9}));
}

TEST_F(RRefTest, StatusCountsOwnedAndHeld) {
  StartJob(2);
  ASSERT_OK_AND_ASSIGN(RRef r,
                       worker(0).rrefs().Remote("worker1", "echo", {1}));
  ASSERT_OK(r.ToHere());
  EXPECT_EQ(worker(1).rpc().Status().owned_rrefs(), 1);
  EXPECT_EQ(worker(0).rpc().Status().user_rrefs(), 1);
}

TEST_F(RRefTest, GracefulShutdownDrainsReleases) {
  StartJob(3);
  {
    ASSERT_OK_AND_ASSIGN(RRef r,
                         worker(0).rrefs().Remote("worker1", "echo", {1}));
    ASSERT_OK(r.ToHere());
  }
  EXPECT_OK(job_->ShutdownAll());
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
}

}  // namespace
}  // namespace ferry
