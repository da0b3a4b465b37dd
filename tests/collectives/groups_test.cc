// Process groups over subsets of the ranks, ops on several groups at once,
// the asynchronous forms (Work) and tagged ops.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "rpc/value/json.h"
#include "tests/collectives/collective_testing.h"
#include "tests/collectives/spmd.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::OnEveryRank;
using ::ferry::testing::Spmd;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }

class GroupsTest : public ::testing::Test {
 protected:
  void Start(int n) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n);
    ASSERT_OK(job);
    job_ = *std::move(job);
  }
  ProcessGroup& World(int r) { return job_->worker(r).collectives().world(); }
  std::unique_ptr<LocalJob> job_;
};

TEST_F(GroupsTest, NewGroupChecksItsRanks) {
  Start(3);
  CollectiveContext& c = job_->worker(1).collectives();
  EXPECT_THAT(c.NewGroup({0, 3}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("group rank 3 is out of range [0, 3)")));
  EXPECT_THAT(c.NewGroup({-1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("group rank -1 is out of range")));
  EXPECT_THAT(c.NewGroup({1, 2, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 1 appears twice in the group")));
  EXPECT_THAT(c.NewGroup({0, 2}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("worker1 is not a member of group [0, 2]")));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ProcessGroup> g, c.NewGroup({2, 1}));
  EXPECT_EQ(g->size(), 2);
  EXPECT_EQ(g->rank(), 1);
  EXPECT_EQ(g->members()[0], 2);
  EXPECT_EQ(World(1).size(), 3);
  EXPECT_EQ(World(1).rank(), 1);
}

// A group of global ranks {3, 1, 4} of five, in that order: group rank 0 is
// global rank 3. Ranks 0 and 2 take no part (and are not asked anything).
TEST_F(GroupsTest, SubgroupOverASubsetInAnyOrder) {
  Start(5);
  const std::vector<int> members = {3, 1, 4};
  struct Out {
    int group_rank = -1;
    absl::StatusOr<Tensor> sum = absl::UnknownError("not run");
    absl::StatusOr<std::vector<Tensor>> gathered = absl::UnknownError("");
    absl::StatusOr<Value> broadcast = absl::UnknownError("not run");
    absl::StatusOr<std::vector<Tensor>> a2a = absl::UnknownError("not run");
    absl::StatusOr<std::vector<Value>> gather = absl::UnknownError("");
    absl::Status barrier = absl::UnknownError("not run");
  };
  auto out = OnEveryRank<Out>(*job_, [&](WorkerImpl& w, int r) {
    Out o;
    if (r == 0 || r == 2) return o;  // Not members.
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g =
        w.collectives().NewGroup(members);
    if (!g.ok()) {
      o.sum = g.status();
      return o;
    }
    ProcessGroup& group = **g;
    o.group_rank = group.rank();
    o.sum = AllReduce(group, I64({r, 10 * r}));
    o.gathered = AllGather(group, I64({r}));
    // src 0 is global rank 3.
    o.broadcast = Broadcast(group, Value(absl::StrCat("from ", r)), 0);
    std::vector<Tensor> in;
    for (int i = 0; i < 3; ++i) in.push_back(I64({100 * r + i}));
    o.a2a = AllToAll(group, in);
    o.gather = Gather(group, Value(r), 2);  // dst: global rank 4
    o.barrier = Barrier(group);
    return o;
  });
  const std::vector<int> group_rank_of = {-1, 1, -1, 0, 2};
  for (int r : members) {
    SCOPED_TRACE(absl::StrCat("global rank ", r));
    EXPECT_EQ(out[r].group_rank, group_rank_of[r]);
    ASSERT_OK(out[r].sum);
    EXPECT_EQ(*out[r].sum, I64({8, 80}));
    ASSERT_OK(out[r].gathered);
    EXPECT_EQ(*out[r].gathered,
              (std::vector<Tensor>{I64({3}), I64({1}), I64({4})}));
    ASSERT_OK(out[r].broadcast);
    EXPECT_EQ(*out[r].broadcast, Value("from 3"));
    ASSERT_OK(out[r].a2a);
    const int me = group_rank_of[r];
    EXPECT_EQ(*out[r].a2a,
              (std::vector<Tensor>{I64({300 + me}), I64({100 + me}),
                                   I64({400 + me})}));
    ASSERT_OK(out[r].gather);
    if (r == 4) {
      EXPECT_EQ(*out[r].gather,
                (std::vector<Value>{Value(3), Value(1), Value(4)}));
    } else {
      EXPECT_TRUE(out[r].gather->empty());
    }
    EXPECT_OK(out[r].barrier);
  }
  // The non-members hold nothing and never ran an op.
  for (int r : {0, 2}) {
    EXPECT_EQ(job_->worker(r).collectives().mailbox().held_messages(), 0);
    proto::WorkerStatus status;
    job_->worker(r).collectives().FillStatus(&status);
    EXPECT_EQ(status.collectives_inflight(), 0);
  }
  // The world group was not used: its first op is still op 0, in step.
  auto world = Spmd<Tensor>(*job_, [](WorkerImpl& w, int r) {
    return AllReduce(w.collectives().world(), I64({r}));
  });
  for (int r = 0; r < 5; ++r) {
    ASSERT_OK(world[r]);
    EXPECT_EQ(*world[r], I64({10}));
  }
}

TEST_F(GroupsTest, SingleRankGroup) {
  Start(3);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ProcessGroup> g,
                       job_->worker(2).collectives().NewGroup({2}));
  ASSERT_OK_AND_ASSIGN(Tensor sum, AllReduce(*g, I64({7})));
  EXPECT_EQ(sum, I64({7}));
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> all, AllToAll(*g, {I64({1, 2})}));
  EXPECT_EQ(all, std::vector<Tensor>{I64({1, 2})});
  EXPECT_OK(Barrier(*g));
  ASSERT_OK_AND_ASSIGN(Value b, Broadcast(*g, Value("x"), 0));
  EXPECT_EQ(b, Value("x"));
}

// An async op keeps its group alive: the caller may drop it at once.
TEST_F(GroupsTest, AsyncOpOutlivesItsGroupHandle) {
  Start(2);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ProcessGroup> g,
                       job_->worker(1).collectives().NewGroup({1}));
  Work<Tensor> w = AllReduceAsync(*g, I64({7}));
  g.reset();
  ASSERT_OK_AND_ASSIGN(Tensor sum, w.Wait(absl::Seconds(30)));
  EXPECT_EQ(sum, I64({7}));
}

// After Stop, ops fail at once with UNAVAILABLE, queued ones included.
TEST_F(GroupsTest, OpsAfterStopFailAtOnce) {
  Start(2);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ProcessGroup> g,
                       job_->worker(0).collectives().NewGroup({0}));
  job_->worker(0).collectives().Stop();
  EXPECT_THAT(AllReduce(*g, I64({1})),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(BarrierAsync(*g).Wait(absl::Seconds(30)),
              StatusIs(absl::StatusCode::kUnavailable));
}

// Two threads per rank, each running ops on its own group, at once: the
// world, the same ranks in reverse order, and disjoint pairs.
TEST_F(GroupsTest, ConcurrentOpsOnTwoGroups) {
  Start(4);
  constexpr int kOps = 15;
  struct Out {
    std::vector<absl::StatusOr<Tensor>> world, reversed, pair;
    std::vector<absl::StatusOr<std::vector<Tensor>>> gathered;
  };
  auto out = OnEveryRank<Out>(*job_, [&](WorkerImpl& w, int r) {
    Out o;
    absl::StatusOr<std::shared_ptr<ProcessGroup>> reversed =
        w.collectives().NewGroup({3, 2, 1, 0});
    absl::StatusOr<std::shared_ptr<ProcessGroup>> pair =
        w.collectives().NewGroup(r < 2 ? std::vector<int>{0, 1}
                                       : std::vector<int>{2, 3});
    if (!reversed.ok() || !pair.ok()) {
      o.world.push_back(reversed.ok() ? pair.status() : reversed.status());
      return o;
    }
    std::thread a([&] {
      for (int i = 0; i < kOps; ++i)
        o.world.push_back(AllReduce(w.collectives().world(), I64({r, i})));
    });
    std::thread b([&] {
      for (int i = 0; i < kOps; ++i) {
        o.reversed.push_back(
            AllReduce(**reversed, I64({10 * r, i}), ReduceOp::kMax));
        o.gathered.push_back(AllGather(**reversed, I64({r})));
      }
    });
    std::thread c([&] {
      for (int i = 0; i < kOps; ++i)
        o.pair.push_back(AllReduce(**pair, I64({r}), ReduceOp::kProd));
    });
    a.join();
    b.join();
    c.join();
    return o;
  });
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_EQ(out[r].world.size(), static_cast<size_t>(kOps));
    ASSERT_EQ(out[r].reversed.size(), static_cast<size_t>(kOps));
    ASSERT_EQ(out[r].pair.size(), static_cast<size_t>(kOps));
    for (int i = 0; i < kOps; ++i) {
      ASSERT_OK(out[r].world[i]);
      EXPECT_EQ(*out[r].world[i], I64({6, 4 * i}));
      ASSERT_OK(out[r].reversed[i]);
      EXPECT_EQ(*out[r].reversed[i], I64({30, i}));
      ASSERT_OK(out[r].gathered[i]);
      EXPECT_EQ(*out[r].gathered[i],
                (std::vector<Tensor>{I64({3}), I64({2}), I64({1}), I64({0})}));
      ASSERT_OK(out[r].pair[i]);
      EXPECT_EQ(*out[r].pair[i], I64({r < 2 ? 0 : 6}));
    }
  }
}

// Two groups over the same ranks are distinct: async ops started on them
// in opposite orders on the two ranks still pair up by group.
TEST_F(GroupsTest, SameRanksTwiceAreTwoGroups) {
  Start(2);
  auto out = OnEveryRank<std::vector<absl::StatusOr<Tensor>>>(
      *job_, [&](WorkerImpl& w, int r) {
        std::vector<absl::StatusOr<Tensor>> results;
        auto g1 = w.collectives().NewGroup({0, 1});
        auto g2 = w.collectives().NewGroup({0, 1});
        if (!g1.ok() || !g2.ok()) return results;
        Work<Tensor> on1 = r == 0 ? AllReduceAsync(**g1, I64({1}))
                                  : AllReduceAsync(**g2, I64({20}));
        Work<Tensor> on2 = r == 0 ? AllReduceAsync(**g2, I64({2}))
                                  : AllReduceAsync(**g1, I64({10}));
        results.push_back(on1.Wait(absl::Seconds(30)));
        results.push_back(on2.Wait(absl::Seconds(30)));
        return results;
      });
  ASSERT_EQ(out[0].size(), 2u);
  ASSERT_EQ(out[1].size(), 2u);
  // g1: 1 + 10; g2: 2 + 20.
  EXPECT_EQ(*out[0][0], I64({11}));
  EXPECT_EQ(*out[0][1], I64({22}));
  EXPECT_EQ(*out[1][0], I64({22}));
  EXPECT_EQ(*out[1][1], I64({11}));
}

// Every async form, several in flight per rank (more than the collectives
// executor's threads), waited for in reverse order.
TEST_F(GroupsTest, AsyncFormsMatchTheSyncOnes) {
  Start(3);
  struct Out {
    absl::StatusOr<std::vector<Tensor>> a2a = absl::UnknownError("");
    absl::StatusOr<Tensor> a2a_single = absl::UnknownError("");
    absl::StatusOr<std::vector<Tensor>> gathered = absl::UnknownError("");
    absl::StatusOr<Value> gathered_axis = absl::UnknownError("");
    absl::StatusOr<Tensor> reduced = absl::UnknownError("");
    absl::StatusOr<Tensor> scattered = absl::UnknownError("");
    absl::StatusOr<Value> broadcast = absl::UnknownError("");
    absl::StatusOr<Value> scatter = absl::UnknownError("");
    absl::StatusOr<std::vector<Value>> gather = absl::UnknownError("");
    absl::StatusOr<Done> barrier = absl::UnknownError("");
    absl::StatusOr<Value> by_name = absl::UnknownError("");
  };
  auto out = OnEveryRank<Out>(*job_, [&](WorkerImpl& w, int r) {
    ProcessGroup& g = w.collectives().world();
    Out o;
    auto w1 =
        AllToAllAsync(g, {I64({10 * r}), I64({10 * r + 1}), I64({10 * r + 2})});
    auto w2 = AllToAllSingleAsync(g, I64({r, r, r}));
    auto w3 = AllGatherAsync(g, I64({r}));
    auto w4 = AllGatherAsync(g, Value(Value::List{I64({r})}), 0);
    auto w5 = AllReduceAsync(g, I64({r + 1}), ReduceOp::kProd);
    auto w6 = ReduceScatterAsync(g, {I64({r}), I64({r, r}), I64({1})});
    auto w7 = BroadcastAsync(g, Value(r), 1);
    auto w8 = ScatterAsync(g, {Value("a"), Value("b"), Value("c")}, 2);
    auto w9 = GatherAsync(g, Value(r), 0);
    auto w10 = BarrierAsync(g);
    auto w11 = RunCollectiveAsync(g, "all_reduce", Value(I64({r})),
                                  Value(Value::Map{{"op", "max"}}));
    const absl::Duration t = absl::Seconds(30);
    o.by_name = w11.Wait(t);
    o.barrier = w10.Wait(t);
    o.gather = w9.Wait(t);
    o.scatter = w8.Wait(t);
    o.broadcast = w7.Wait(t);
    o.scattered = w6.Wait(t);
    o.reduced = w5.Wait(t);
    o.gathered_axis = w4.Wait(t);
    o.gathered = w3.Wait(t);
    o.a2a_single = w2.Wait(t);
    o.a2a = w1.Wait(t);
    for (bool done : {w1.IsCompleted(), w5.IsCompleted(), w10.IsCompleted()})
      EXPECT_TRUE(done);
    EXPECT_OK(w1.status());
    return o;
  });
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_OK(out[r].a2a);
    EXPECT_EQ(*out[r].a2a,
              (std::vector<Tensor>{I64({r}), I64({10 + r}), I64({20 + r})}));
    ASSERT_OK(out[r].a2a_single);
    EXPECT_EQ(*out[r].a2a_single, I64({0, 1, 2}));
    ASSERT_OK(out[r].gathered);
    EXPECT_EQ(*out[r].gathered,
              (std::vector<Tensor>{I64({0}), I64({1}), I64({2})}));
    ASSERT_OK(out[r].gathered_axis);
    EXPECT_EQ(*out[r].gathered_axis, Value(Value::List{I64({0, 1, 2})}));
    ASSERT_OK(out[r].reduced);
    EXPECT_EQ(*out[r].reduced, I64({6}));
    ASSERT_OK(out[r].scattered);
    const std::vector<Tensor> want_rs = {I64({3}), I64({3, 3}), I64({3})};
    EXPECT_EQ(*out[r].scattered, want_rs[r]);
    ASSERT_OK(out[r].broadcast);
    EXPECT_EQ(*out[r].broadcast, Value(1));
    ASSERT_OK(out[r].scatter);
    EXPECT_EQ(*out[r].scatter, Value(std::string(1, "abc"[r])));
    ASSERT_OK(out[r].gather);
    if (r == 0) {
      EXPECT_EQ(*out[r].gather,
                (std::vector<Value>{Value(0), Value(1), Value(2)}));
    } else {
      EXPECT_TRUE(out[r].gather->empty());
    }
    EXPECT_OK(out[r].barrier);
    ASSERT_OK(out[r].by_name);
    EXPECT_EQ(*out[r].by_name, Value(I64({2})));
  }
}

// A Work handle while its op cannot finish (a member has not started it),
// then once it has.
TEST_F(GroupsTest, WorkHandleWhileRunningAndDone) {
  Start(3);
  // Started from this thread: async calls do not block.
  Work<Done> w0 = BarrierAsync(World(0));
  Work<Tensor> r0 = AllReduceAsync(World(0), I64({1}));
  Work<Done> w1 = BarrierAsync(World(1));
  Work<Tensor> r1 = AllReduceAsync(World(1), I64({2}));
  // Rank 2 has not joined: nothing can complete.
  EXPECT_FALSE(w0.IsCompleted());
  EXPECT_FALSE(r1.IsCompleted());
  EXPECT_OK(w0.status());  // OK while running.
  EXPECT_OK(r1.status());
  EXPECT_THAT(w1.Wait(absl::Milliseconds(20)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("no result within 20 ms")));
  EXPECT_FALSE(w1.IsCompleted());  // The op goes on after a Wait expires.
  Work<Done> w2 = BarrierAsync(World(2));
  Work<Tensor> r2 = AllReduceAsync(World(2), I64({3}));
  for (const Work<Done>* w : {&w0, &w1, &w2}) {
    EXPECT_OK(w->Wait(absl::Seconds(30)));
    EXPECT_TRUE(w->IsCompleted());
    EXPECT_OK(w->status());
  }
  for (const Work<Tensor>* r : {&r0, &r1, &r2}) {
    ASSERT_OK_AND_ASSIGN(Tensor sum, r->Wait(absl::Seconds(30)));
    EXPECT_EQ(sum, I64({6}));
    EXPECT_TRUE(r->IsCompleted());
  }
  // A completed future can be composed.
  EXPECT_TRUE(r0.future().IsReady());
}

TEST_F(GroupsTest, FailedWorkReportsItsStatus) {
  Start(2);
  Work<Tensor> a = AllReduceAsync(World(0), I64({1, 2}));
  Work<Tensor> b = AllReduceAsync(World(1), I64({1, 2, 3}));
  for (const Work<Tensor>* w : {&a, &b}) {
    EXPECT_THAT(w->Wait(absl::Seconds(30)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("rank 1 (worker1) has input int64 [3] but "
                                   "rank 0 (worker0) has int64 [2]")));
    EXPECT_TRUE(w->IsCompleted());
    EXPECT_THAT(w->status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("all_reduce op 0")));
  }
  // Unknown collective: refused at once, no op number used.
  Work<Value> unknown =
      RunCollectiveAsync(World(0), "all_sum", Value(), Value());
  EXPECT_TRUE(unknown.IsCompleted());
  EXPECT_THAT(unknown.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown collective \"all_sum\"")));
  // And the group goes on, at op 1 on both.
  Work<Tensor> c = AllReduceAsync(World(0), I64({1}));
  Work<Tensor> d = AllReduceAsync(World(1), I64({2}));
  ASSERT_OK_AND_ASSIGN(Tensor sum0, c.Wait(absl::Seconds(30)));
  ASSERT_OK_AND_ASSIGN(Tensor sum1, d.Wait(absl::Seconds(30)));
  EXPECT_EQ(sum0, I64({3}));
  EXPECT_EQ(sum1, I64({3}));
}

// Tagged ops are matched by tag, not by order: each rank starts them in a
// different order. They use no sequence numbers: untagged ops stay in step.
TEST_F(GroupsTest, TaggedOpsMatchByTag) {
  Start(4);
  const std::vector<std::string> tags = {"alpha", "beta", "gamma", "delta"};
  auto out = OnEveryRank<std::vector<absl::StatusOr<Tensor>>>(
      *job_, [&](WorkerImpl& w, int r) {
        ProcessGroup& g = w.collectives().world();
        std::vector<absl::StatusOr<Tensor>> results(tags.size() + 2,
                                                    absl::UnknownError(""));
        results[tags.size()] = AllReduce(g, I64({r}));  // op 0
        std::vector<std::pair<size_t, Work<Tensor>>> works;
        for (size_t k = 0; k < tags.size(); ++k) {
          const size_t t = (k + r) % tags.size();  // rotated per rank
          CollectiveOptions options;
          options.tag = tags[t];
          works.emplace_back(
              t, AllReduceAsync(g, I64({static_cast<int64_t>(100 * t + r)}),
                                ReduceOp::kSum, options));
        }
        for (auto& [t, work] : works) results[t] = work.Wait(absl::Seconds(30));
        results[tags.size() + 1] = AllReduce(g, I64({2 * r}));  // op 1
        return results;
      });
  for (int r = 0; r < 4; ++r) {
    for (size_t t = 0; t < tags.size(); ++t) {
      ASSERT_OK(out[r][t]);
      EXPECT_EQ(*out[r][t], I64({static_cast<int64_t>(400 * t + 6)}))
          << "rank " << r << " tag " << tags[t];
    }
    EXPECT_EQ(*out[r][tags.size()], I64({6}));
    EXPECT_EQ(*out[r][tags.size() + 1], I64({12}));
  }
}

// Tagged ops may be started in any order, and async ones hold no thread
// while they wait for their peers: more of them in flight than the old
// collectives executor had threads (4), started in opposite orders on the
// two ranks, all complete. (With a thread per waiting op, each rank's
// threads were all taken by ops whose peers were queued behind other ops
// on the other rank, and all 16 calls failed at their deadline.)
TEST_F(GroupsTest, MoreTaggedAsyncOpsThanThreadsInOppositeOrders) {
  Start(2);
  auto out =
      OnEveryRank<std::vector<absl::Status>>(*job_, [&](WorkerImpl& w, int r) {
        std::vector<Work<Tensor>> works;
        for (int k = 0; k < 8; ++k) {
          CollectiveOptions options;
          options.timeout = absl::Seconds(2);
          options.tag = absl::StrCat("t", r == 0 ? k : 7 - k);
          works.push_back(AllReduceAsync(w.collectives().world(), I64({r}),
                                         ReduceOp::kSum, options));
        }
        std::vector<absl::Status> results;
        for (const Work<Tensor>& work : works)
          results.push_back(work.Wait(absl::Seconds(30)).status());
        return results;
      });
  for (int r = 0; r < 2; ++r) {
    for (const absl::Status& s : out[r]) EXPECT_OK(s);
  }
}

// Many async ops of every kind in flight at once, each rank starting them
// in the opposite order: each progresses as its messages come, on whatever
// thread delivers them.
TEST_F(GroupsTest, ManyAsyncOpsOfEveryKindInOppositeOrders) {
  Start(2);
  constexpr int kOps = 64;
  struct Works {
    std::vector<Work<Tensor>> reduced;
    std::vector<Work<std::vector<Tensor>>> gathered;
    std::vector<Work<Value>> broadcast;
    std::vector<Work<Done>> barriers;
  };
  auto out = OnEveryRank<std::vector<absl::Status>>(*job_, [&](WorkerImpl& w,
                                                               int r) {
    ProcessGroup& g = w.collectives().world();
    Works works;
    for (int i = 0; i < kOps; ++i) {
      const int k = r == 0 ? i : kOps - 1 - i;
      CollectiveOptions options;
      options.timeout = absl::Seconds(20);
      options.tag = absl::StrCat("op", k);
      switch (k % 4) {
        case 0:
          works.reduced.push_back(
              AllReduceAsync(g, I64({k, r}), ReduceOp::kSum, options));
          break;
        case 1:
          works.gathered.push_back(AllGatherAsync(g, I64({k + r}), options));
          break;
        case 2:
          works.broadcast.push_back(
              BroadcastAsync(g, Value(k + r), 1, options));
          break;
        default:
          works.barriers.push_back(BarrierAsync(g, options));
      }
    }
    std::vector<absl::Status> results;
    auto check = [&](bool ok, const std::string& what) {
      results.push_back(ok ? absl::OkStatus() : absl::InternalError(what));
    };
    for (const Work<Tensor>& work : works.reduced) {
      absl::StatusOr<Tensor> t = work.Wait(absl::Seconds(60));
      if (!t.ok()) results.push_back(t.status());
      if (t.ok()) check(t->ToVector<int64_t>()[1] == 1, t->DebugString());
    }
    for (const Work<std::vector<Tensor>>& work : works.gathered) {
      absl::StatusOr<std::vector<Tensor>> all = work.Wait(absl::Seconds(60));
      if (!all.ok()) results.push_back(all.status());
      if (all.ok()) check(all->size() == 2, "gathered");
    }
    for (const Work<Value>& work : works.broadcast) {
      absl::StatusOr<Value> v = work.Wait(absl::Seconds(60));
      if (!v.ok()) results.push_back(v.status());
      if (v.ok()) check(v->is_int() && v->as_int() % 4 == 3, ToJson(*v));
    }
    for (const Work<Done>& work : works.barriers)
      results.push_back(work.Wait(absl::Seconds(60)).status());
    return results;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].size(), static_cast<size_t>(kOps)) << "rank " << r;
    for (const absl::Status& s : out[r])
      EXPECT_TRUE(s.ok()) << "rank " << r << ": " << s;
  }
}

TEST_F(GroupsTest, TaggedOpErrorsNameTheTag) {
  Start(2);
  auto out = Spmd<Tensor>(*job_, [](WorkerImpl& w, int r) {
    CollectiveOptions options;
    options.tag = "step-7";
    return AllReduce(w.collectives().world(), I64(std::vector<int64_t>(r + 1)),
                     ReduceOp::kSum, options);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("all_reduce op step-7: rank 1 "
                                           "(worker1) has input int64 [2]")));
  }
  // A tagged sync op then works, with a new tag.
  auto again = Spmd<Tensor>(*job_, [](WorkerImpl& w, int r) {
    CollectiveOptions options;
    options.tag = "step-8";
    return AllReduce(w.collectives().world(), I64({r}), ReduceOp::kSum,
                     options);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(again[r]);
    EXPECT_EQ(*again[r], I64({1}));
  }
}

}  // namespace
}  // namespace ferry
