// Ranks that never join (DEADLINE_EXCEEDED on the others, naming them),
// ranks whose worker stops mid-op (UNAVAILABLE on the others, naming it,
// without waiting for the op's deadline), and the group working after a
// failed op. Timeouts are short; nothing asserts on time.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "collectives/op/group_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "tests/collectives/collective_testing.h"
#include "tests/testing/await.h"
#include "tests/testing/fake_membership.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::GetStatus;
using ::ferry::testing::OnEveryRank;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }

CollectiveOptions Timeout(int ms) {
  CollectiveOptions o;
  o.timeout = absl::Milliseconds(ms);
  return o;
}

class FailureTest : public ::testing::Test {
 protected:
  void Start(int n, LocalJob::Options options = {}) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n, options);
    ASSERT_OK(job);
    job_ = *std::move(job);
  }
  ProcessGroup& World(int r) { return job_->worker(r).collectives().world(); }

  // Runs fn on the ranks in `ranks` only, concurrently; by rank (others
  // left as "not run").
  std::vector<absl::Status> OnRanks(
      const std::vector<int>& ranks,
      const std::function<absl::Status(ProcessGroup&, int)>& fn) {
    std::vector<absl::Status> out(job_->size(), absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r : ranks) {
      threads.emplace_back([&, r] { out[r] = fn(World(r), r); });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

  // An all_reduce on every rank of the world succeeds.
  void ExpectWorldWorks() {
    std::vector<int> all;
    for (int r = 0; r < job_->size(); ++r) all.push_back(r);
    std::vector<Tensor> sums(job_->size());
    auto out = OnRanks(all, [&](ProcessGroup& g, int r) {
      absl::StatusOr<Tensor> s = AllReduce(g, I64({r}));
      if (s.ok()) sums[r] = *s;
      return s.status();
    });
    const int64_t want = job_->size() * (job_->size() - 1) / 2;
    for (int r = 0; r < job_->size(); ++r) {
      EXPECT_OK(out[r]);
      EXPECT_EQ(sums[r], I64({want})) << "rank " << r;
    }
  }

  // Waits (bounded) until `rank` runs `count` collective ops.
  bool WaitInflight(int rank, int64_t count) {
    return AwaitTrue(
        [&] {
          proto::WorkerStatus status;
          job_->worker(rank).collectives().FillStatus(&status);
          return status.collectives_inflight() == count;
        },
        absl::Seconds(20));
  }

  std::unique_ptr<LocalJob> job_;
};

// Rank 1 does not call the op: ranks 0 and 2 fail naming it. It then
// comes late and fails too (the op was aborted); the next op works.
TEST_F(FailureTest, MissingRankDeadlineExceededNamesIt) {
  Start(3);
  auto out = OnRanks({0, 2}, [](ProcessGroup& g, int r) {
    return AllReduce(g, I64({r}), ReduceOp::kSum, Timeout(500)).status();
  });
  for (int r : {0, 2}) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                 HasSubstr("all_reduce op 0: rank 1 (worker1) "
                                           "did not join within 500 ms")))
        << "rank " << r;
  }
  // The latecomer's op 0 was failed by the others.
  EXPECT_THAT(AllReduce(World(1), I64({1}), ReduceOp::kSum, Timeout(1000)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ExpectWorldWorks();
}

TEST_F(FailureTest, MissingRanksAreAllNamed) {
  Start(4);
  auto out = OnRanks(
      {0, 2}, [](ProcessGroup& g, int) { return Barrier(g, Timeout(700)); });
  for (int r : {0, 2}) {
    EXPECT_THAT(out[r],
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("barrier op 0: ranks 1 (worker1), 3 "
                                   "(worker3) did not join within 700 ms")))
        << "rank " << r;
  }
  auto late = OnRanks(
      {1, 3}, [](ProcessGroup& g, int) { return Barrier(g, Timeout(1000)); });
  for (int r : {1, 3}) {
    EXPECT_THAT(late[r], StatusIs(absl::StatusCode::kDeadlineExceeded))
        << "rank " << r;
  }
  ExpectWorldWorks();
}

// The same for each kind of op that needs every rank, and for broadcast's
// source missing; the missing rank is the last one (4 of 5), then rank 0.
TEST_F(FailureTest, MissingRankInEachCollective) {
  Start(5);
  struct Case {
    std::string name;
    std::function<absl::Status(ProcessGroup&, int)> fn;
  };
  const std::vector<Case> cases = {
      {"all_reduce",
       [](ProcessGroup& g, int r) {
         return AllReduce(g, I64({r}), ReduceOp::kMax, Timeout(500)).status();
       }},
      {"all_gather",
       [](ProcessGroup& g, int r) {
         return AllGather(g, I64({r}), Timeout(500)).status();
       }},
      {"all_to_all_single",
       [](ProcessGroup& g, int) {
         return AllToAllSingle(g, I64({0, 1, 2, 3, 4}), {}, {}, Timeout(500))
             .status();
       }},
      {"all_to_all",
       [](ProcessGroup& g, int) {
         return AllToAll(g, std::vector<Tensor>(5, I64({1})), Timeout(500))
             .status();
       }},
      {"reduce_scatter",
       [](ProcessGroup& g, int) {
         return ReduceScatter(g, std::vector<Tensor>(5, I64({1})),
                              ReduceOp::kSum, Timeout(500))
             .status();
       }},
      {"all_gather",  // tf form
       [](ProcessGroup& g, int) {
         return AllGather(g, Value(I64({1})), 0, Timeout(500)).status();
       }},
      // Rooted at rank 0: the root missing, or one of its peers.
      {"gather",
       [](ProcessGroup& g, int r) {
         return Gather(g, Value(r), 0, Timeout(500)).status();
       }},
      {"scatter",
       [](ProcessGroup& g, int) {
         return Scatter(g, std::vector<Value>(5, Value(1)), 0, Timeout(500))
             .status();
       }},
      {"broadcast",
       [](ProcessGroup& g, int) {
         return Broadcast(g, Value(1), 0, Timeout(500)).status();
       }},
  };
  int op = 0;
  for (int missing : {4, 0}) {
    std::vector<int> present;
    for (int r = 0; r < 5; ++r) {
      if (r != missing) present.push_back(r);
    }
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.name, " without rank ", missing));
      auto out = OnRanks(present, c.fn);
      for (int r : present) {
        EXPECT_THAT(
            out[r],
            StatusIs(absl::StatusCode::kDeadlineExceeded,
                     HasSubstr(absl::StrCat(c.name, " op ", op, ": rank ",
                                            missing, " (worker", missing,
                                            ") did not join within 500 ms"))))
            << "rank " << r;
      }
      // The latecomer catches up (its op fails: it was aborted).
      auto late = OnRanks({missing}, c.fn);
      EXPECT_THAT(late[missing], StatusIs(absl::StatusCode::kDeadlineExceeded));
      // Nothing of the failed op stays in any mailbox.
      for (int r = 0; r < 5; ++r) {
        EXPECT_EQ(job_->worker(r).collectives().mailbox().held_messages(), 0)
            << "rank " << r;
      }
      ++op;
    }
  }
  // Broadcast from a source that never comes.
  auto out = OnRanks({1, 2, 3, 4}, [](ProcessGroup& g, int) {
    return Broadcast(g, Value(), 0, Timeout(500)).status();
  });
  for (int r : {1, 2, 3, 4}) {
    EXPECT_THAT(
        out[r],
        StatusIs(absl::StatusCode::kDeadlineExceeded,
                 HasSubstr(absl::StrCat("broadcast op ", op,
                                        ": rank 0 (worker0) did not join"))))
        << "rank " << r;
  }
  OnRanks({0}, [](ProcessGroup& g, int) {
    return Broadcast(g, Value(1), 0, Timeout(500)).status();
  });
  ExpectWorldWorks();
}

// Without CollectiveOptions::timeout, the worker's default call timeout.
TEST_F(FailureTest, DefaultTimeoutIsTheWorkers) {
  LocalJob::Options options;
  options.configure = [](WorkerConfig& o) {
    o.default_timeout = absl::Milliseconds(600);
  };
  Start(2, options);
  EXPECT_THAT(Barrier(World(0)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("barrier op 0: rank 1 (worker1) did not join "
                                 "within 600 ms")));
  EXPECT_THAT(Barrier(World(1)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  ExpectWorldWorks();
}

// A tagged op that a rank skips: the others fail naming it; untagged ops
// are unaffected (tags use no sequence numbers), and so are other tags.
TEST_F(FailureTest, MissingRankInTaggedOp) {
  Start(3);
  CollectiveOptions tagged = Timeout(500);
  tagged.tag = "skipped";
  auto out = OnRanks({0, 1}, [&](ProcessGroup& g, int r) {
    return AllReduce(g, I64({r}), ReduceOp::kSum, tagged).status();
  });
  for (int r : {0, 1}) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                 HasSubstr("all_reduce op skipped: rank 2 "
                                           "(worker2) did not join within "
                                           "500 ms")));
  }
  ExpectWorldWorks();
  tagged.tag = "next";
  auto next = OnRanks({0, 1, 2}, [&](ProcessGroup& g, int r) {
    return AllReduce(g, I64({r}), ReduceOp::kSum, tagged).status();
  });
  for (int r = 0; r < 3; ++r) EXPECT_OK(next[r]);
}

TEST_F(FailureTest, AsyncOpWithMissingRank) {
  Start(2);
  Work<Tensor> w =
      AllReduceAsync(World(0), I64({1}), ReduceOp::kSum, Timeout(500));
  EXPECT_THAT(w.Wait(absl::Seconds(30)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("all_reduce op 0: rank 1 (worker1) did not "
                                 "join within 500 ms")));
  EXPECT_TRUE(w.IsCompleted());
  EXPECT_THAT(w.status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  Work<Tensor> late =
      AllReduceAsync(World(1), I64({1}), ReduceOp::kSum, Timeout(1000));
  EXPECT_THAT(late.Wait(absl::Seconds(30)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ExpectWorldWorks();
}

// Rank 2 is stopped while ranks 0 and 1 wait for it in an op with a long
// deadline: they fail with UNAVAILABLE naming it, long before the deadline
// (the test would time out otherwise; it asserts no time).
TEST_F(FailureTest, StoppedRankUnavailableNamesIt) {
  Start(3);
  std::vector<absl::Status> out(2, absl::UnknownError("not run"));
  std::thread t0([&] {
    out[0] =
        AllReduce(World(0), I64({0}), ReduceOp::kSum, Timeout(300000)).status();
  });
  std::thread t1([&] {
    out[1] =
        AllReduce(World(1), I64({1}), ReduceOp::kSum, Timeout(300000)).status();
  });
  EXPECT_TRUE(WaitInflight(0, 1));
  EXPECT_TRUE(WaitInflight(1, 1));
  job_->worker(2).Stop();
  t0.join();
  t1.join();
  for (int r : {0, 1}) {
    EXPECT_THAT(out[r],
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("all_reduce op 0: rank 2 (worker2)")))
        << "rank " << r;
  }
  // The survivors go on in a group of their own.
  auto pair = OnRanks({0, 1}, [](ProcessGroup& g, int r) -> absl::Status {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> survivors =
        g.state().context().NewGroup({0, 1});
    if (!survivors.ok()) return survivors.status();
    absl::StatusOr<Tensor> sum = AllReduce(**survivors, I64({r + 1}));
    if (!sum.ok()) return sum.status();
    if (*sum != I64({3})) return absl::InternalError(sum->DebugString());
    return absl::OkStatus();
  });
  EXPECT_OK(pair[0]);
  EXPECT_OK(pair[1]);
}

// Rank 2 is declared dead by the membership while its process still
// serves (a partition, a pause: what a heartbeat timeout finds): the
// others' op fails at once with the membership's reason, long before its
// deadline. The fake membership declares it, so no heartbeat runs out.
TEST_F(FailureTest, RankDeclaredDeadFailsTheOpWithTheReason) {
  testing::FakeMembership members(3);
  Start(3, {.configure = [&](WorkerConfig& c) {
          c.membership_backend = members.Backend();
          c.heartbeat_timeout = absl::Hours(1000);
        }});
  std::vector<absl::Status> out(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      out[r] = AllReduce(World(r), I64({r}), ReduceOp::kSum, Timeout(300000))
                   .status();
    });
  }
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(WaitInflight(r, 1)) << r;
  ASSERT_OK(members.Kill(2, "partitioned by the test"));
  for (std::thread& t : threads) t.join();
  for (int r : {0, 1}) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kUnavailable,
                                 AllOf(HasSubstr("all_reduce op 0: rank 2 "
                                                 "(worker2)"),
                                       HasSubstr("partitioned by the test"))))
        << "rank " << r;
  }
  // Fenced, worker2 is out of the job and stops: its own next op says so.
  // (Before it has stopped, its peers refuse its sends instead, with
  // UNAUTHENTICATED: its credential names no live node.)
  ASSERT_TRUE(job_->worker(2).rpc().WaitStopped(absl::Seconds(60)));
  EXPECT_THAT(AllReduce(World(2), I64({2}), ReduceOp::kSum, Timeout(300000)),
              StatusIs(absl::StatusCode::kUnavailable));
}

// Rank 2 stops while inside the op itself (with rank 3 not there yet): the
// others report rank 2's death, not rank 3's absence; rank 2's own call
// ends as its worker stops.
TEST_F(FailureTest, RankStoppedInsideTheOp) {
  Start(4);
  std::vector<absl::Status> out(3, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      out[r] = AllGather(World(r), I64({r}), Timeout(300000)).status();
    });
  }
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(WaitInflight(r, 1)) << r;
  job_->worker(2).Stop();
  for (std::thread& t : threads) t.join();
  for (int r : {0, 1}) {
    EXPECT_THAT(out[r],
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("all_gather op 0: rank 2 (worker2)")))
        << "rank " << r;
  }
  EXPECT_THAT(out[2], StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("worker2 is stopping")));
}

// A ring op (large payload) interrupted by a stop: the same.
TEST_F(FailureTest, RankStoppedDuringRingAllReduce) {
  LocalJob::Options options;
  options.configure = [](WorkerConfig& o) { o.collectives.direct_bytes = 64; };
  Start(3, options);
  std::vector<absl::Status> out(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      out[r] = AllReduce(World(r), *Tensor::Zeros(DType::kFloat32, {10000}),
                         ReduceOp::kSum, Timeout(300000))
                   .status();
    });
  }
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(WaitInflight(r, 1)) << r;
  job_->worker(2).Stop();
  for (std::thread& t : threads) t.join();
  for (int r : {0, 1}) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kUnavailable,
                                 HasSubstr("rank 2 (worker2)")))
        << "rank " << r;
  }
}

// A member already known dead when the op starts: UNAVAILABLE naming it
// too, without waiting for the op's deadline.
TEST_F(FailureTest, OpStartedAfterAMemberDied) {
  Start(3);
  // Learn of the death through a first op.
  std::vector<absl::Status> first(2, absl::UnknownError("not run"));
  std::thread t0([&] {
    first[0] =
        AllReduce(World(0), I64({0}), ReduceOp::kSum, Timeout(300000)).status();
  });
  std::thread t1([&] {
    first[1] =
        AllReduce(World(1), I64({0}), ReduceOp::kSum, Timeout(300000)).status();
  });
  EXPECT_TRUE(WaitInflight(0, 1));
  EXPECT_TRUE(WaitInflight(1, 1));
  job_->worker(2).Stop();
  t0.join();
  t1.join();
  EXPECT_THAT(first[0], StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(first[1], StatusIs(absl::StatusCode::kUnavailable));
  // (Before the fix in CollectiveContext::Began, this op waited for its
  // whole deadline and then reported rank 2 as not having joined.)
  auto out = OnRanks({0, 1}, [](ProcessGroup& g, int r) {
    return AllReduce(g, I64({r}), ReduceOp::kSum, Timeout(5000)).status();
  });
  for (int r : {0, 1}) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kUnavailable,
                                 HasSubstr("all_reduce op 1: rank 2 (worker2) "
                                           "died")))
        << "rank " << r;
  }
  // Ops that only send (gather to a live rank, from a live rank) need not
  // involve the dead one, but the op's group has it: they fail alike.
  auto gather = OnRanks({0, 1}, [](ProcessGroup& g, int r) {
    return Gather(g, Value(r), 0, Timeout(300000)).status();
  });
  for (int r : {0, 1}) {
    EXPECT_THAT(gather[r], StatusIs(absl::StatusCode::kUnavailable,
                                    HasSubstr("gather op 2: rank 2 (worker2) "
                                              "died")))
        << "rank " << r;
  }
}

}  // namespace
}  // namespace ferry
