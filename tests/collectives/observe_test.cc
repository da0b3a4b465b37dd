// What the flight recorder sees of real ops in an in-process job: a rank
// running another collective at the same point fails the op everywhere,
// naming both ops and ranks; each worker's status shows where its groups
// are and whom a running op waits for; dumps record it all.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "collectives/collectives.h"
#include "collectives/recorder/flight_dumps.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/base/executor.h"
#include "rpc/value/json.h"
#include "tests/collectives/spmd.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Spmd;
using testing::StatusIs;

Tensor Ones(int n) {
  return Tensor::FromVector<float>(std::vector<float>(n, 1));
}

const CollectiveOptions kOptions{.timeout = absl::Seconds(30)};

class ObserveTest : public testing::JobTest {
 protected:
  // A barrier on every rank: the world's op 0.
  void Warmup() {
    for (const auto& r : Spmd<Done>(*job_, [](WorkerImpl&w, int) {
           return Barrier(w.collectives().world(), kOptions).ok()
                      ? absl::StatusOr<Done>(Done())
                      : absl::InternalError("barrier");
         })) {
      ASSERT_OK(r);
    }
  }
};

TEST_F(ObserveTest, AnotherCollectiveAtTheSamePointFailsNamingBoth) {
  Start(3);
  Warmup();
  std::vector<absl::StatusOr<Done>> results =
      Spmd<Done>(*job_, [](WorkerImpl& w, int rank) -> absl::StatusOr<Done> {
        ProcessGroup& world = w.collectives().world();
        absl::Status s =
            rank == 2
                ? AllGather(world, Ones(2), kOptions).status()
                : AllReduce(world, Ones(2), ReduceOp::kSum, kOptions).status();
        if (!s.ok()) return s;
        return Done();
      });
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(
        results[r],
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("collectives called in a different "
                                 "order"),
                       HasSubstr("rank 2 (worker2)"), HasSubstr("all_gather"),
                       HasSubstr("all_reduce"), HasSubstr("world/1"))))
        << "rank " << r;
  }
  // Each worker's recorder holds the op as failed, with what it ran.
  for (int r = 0; r < 3; ++r) {
    std::vector<OpRecord> ops =
        job_->worker(r).collectives().recorder().Snapshot();
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0].spec.op, "barrier");
    EXPECT_EQ(ops[0].state, OpState::kCompleted);
    EXPECT_EQ(ops[1].spec.op, r == 2 ? "all_gather" : "all_reduce");
    EXPECT_EQ(ops[1].spec.sequence, 1);
    EXPECT_EQ(ops[1].state, OpState::kFailed);
    EXPECT_THAT(ops[1].spec.inputs, ElementsAre(TensorSummary{"float32", {2}}));
    EXPECT_THAT(ops[1].error, HasSubstr("INVALID_ARGUMENT"));
  }
  // The group works for the next op.
  for (const auto& r : Spmd<Tensor>(*job_, [](WorkerImpl&w, int) {
         return AllReduce(w.collectives().world(), Ones(2), ReduceOp::kSum,
                          kOptions);
       })) {
    ASSERT_OK(r);
  }
}

TEST_F(ObserveTest, StatusShowsWhomARunningOpWaitsFor) {
  Start(3);
  Warmup();
  // Ranks 0 and 1 begin op 1; rank 2 does not (yet).
  std::vector<Work<Tensor>> waiting;
  for (int r = 0; r < 2; ++r) {
    waiting.push_back(AllReduceAsync(job_->worker(r).collectives().world(),
                                     Ones(2), ReduceOp::kSum, kOptions));
  }
  for (int r = 0; r < 2; ++r) {
    proto::WorkerStatus s = job_->worker(r).rpc().Status();
    ASSERT_EQ(s.groups_size(), 1);
    const proto::GroupProgress& g = s.groups(0);
    EXPECT_EQ(g.group(), "world");
    EXPECT_EQ(g.last_completed_seq(), 0);
    EXPECT_EQ(g.last_completed_op(), "barrier");
    EXPECT_EQ(g.last_scheduled_seq(), 1);
    EXPECT_EQ(g.running(), 1);
    EXPECT_EQ(g.waiting().op(), "all_reduce");
    EXPECT_EQ(g.waiting().key(), "world/1");
    EXPECT_EQ(g.waiting().seq(), 1);
    // Whom its current round receives from (gather_all.h: rank r from
    // r+1, then from r+2): rank 1 waits for worker2 for certain; rank 0 for
    // worker1 until that one's message arrived, then (once its next
    // round's receive is registered) for worker2.
    EXPECT_THAT(g.waiting().waiting_for(),
                ::testing::Each(::testing::AnyOf("worker1", "worker2")));
    if (r == 1) {
      EXPECT_THAT(g.waiting().waiting_for(), ::testing::Contains("worker2"));
    }
  }
  proto::WorkerStatus behind = job_->worker(2).rpc().Status();
  ASSERT_EQ(behind.groups_size(), 1);
  EXPECT_EQ(behind.groups(0).last_scheduled_seq(), 0);
  EXPECT_EQ(behind.groups(0).running(), 0);
  EXPECT_TRUE(behind.groups(0).waiting().op().empty());
  // Rank 2 comes: everyone completes op 1, and waits for nobody.
  ASSERT_OK(AllReduce(job_->worker(2).collectives().world(), Ones(2),
                      ReduceOp::kSum, kOptions));
  for (Work<Tensor>& w : waiting) ASSERT_OK(w.Wait(absl::Seconds(30)));
  for (int r = 0; r < 3; ++r) {
    const proto::GroupProgress g = job_->worker(r).rpc().Status().groups(0);
    EXPECT_EQ(g.last_completed_seq(), 1);
    EXPECT_EQ(g.running(), 0);
  }
}

TEST_F(ObserveTest, OnDemandDumpHoldsTheOps) {
  Start(2);
  Warmup();
  Value dump = job_->worker(1).collectives().FlightDump("on demand");
  EXPECT_EQ(dump.Find("worker")->as_string(), "worker1");
  EXPECT_EQ(dump.Find("reason")->as_string(), "on demand");
  const Value::List& entries = dump.Find("entries")->as_list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].Find("state")->as_string(), "completed");
  EXPECT_EQ(entries[0].Find("profiling_name")->as_string(), "ferry:barrier");
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FlightDumpsTest, WritesOneFilePerWorkerAndCoalesces) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/dumps");
  Executor executor(1);
  // The executor's one thread is held until all three requests are made,
  // so they arrive while the first dump is queued: coalesced, whatever the
  // scheduler does.
  absl::Notification requested;
  ASSERT_TRUE(
      executor.Submit([&requested] { requested.WaitForNotification(); }));
  std::vector<std::string> made;  // On the executor's one thread only.
  auto dumps = std::make_shared<FlightDumps>(
      dir, 3, &executor, [&made](const std::string& reason) {
        made.push_back(reason);
        return Value(Value::Map{{"reason", reason}});
      });
  dumps->Request("first failure");
  dumps->Request("second failure");
  dumps->Request("third failure");
  requested.Notify();
  executor.Stop();  // Runs what was queued, then joins.
  // The first write, then one more, of the last reason.
  EXPECT_THAT(made, ElementsAre("first failure", "third failure"));
  absl::StatusOr<Value> written = ParseJson(ReadFile(dir + "/worker3.json"));
  ASSERT_OK(written);
  EXPECT_EQ(written->Find("reason")->as_string(), "third failure");
}

TEST(FlightDumpsTest, AnUnwritableDirectoryIsUnavailable) {
  EXPECT_THAT(
      WriteDumpFile("/proc/no/such/dir", 0, Value()),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("/proc/no/such/dir")));
}

}  // namespace
}  // namespace ferry
