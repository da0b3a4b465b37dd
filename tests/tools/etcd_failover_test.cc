// Issue 14's failover scenario on real processes: a job of three ferryd on
// a 3-member etcd cluster. While it runs, the etcd leader and worker0 are
// killed (SIGKILL) together. The survivors keep serving calls and
// survivor-only collectives, `ferryctl status` (through the two etcd
// members left) shows worker0 dead, a replacement (started without a rank:
// it takes the free one) rejoins as worker0, and a world all_reduce
// includes it. The steps' durations are printed
// ("[timing] …") for the record; nothing is asserted on them.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "rpc/value/value.h"
#include "tests/testing/await.h"
#include "tests/testing/etcd_job.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::WaitForPidGone;
using ::testing::HasSubstr;

constexpr int kWorld = 3;
// The workers' lease TTL: a few of etcd's leader elections (1 s each), so a
// leader change alone expires nobody's lease; worker0's expires after it.
constexpr int64_t kHeartbeatMs = 6000;
// Bound on any one step.
constexpr absl::Duration kWait = absl::Seconds(60);

class EtcdFailoverTest : public ::ferry::testing::EtcdJobTest {
 protected:
  EtcdFailoverTest()
      : EtcdJobTest({.job = "failover",
                     .world_size = kWorld,
                     .etcd_members = 3,
                     .heartbeat_ms = kHeartbeatMs,
                     .ctl_timeout_ms = 30000,
                     .wait = kWait}) {}

  // Whether `status` shows worker0 dead: its own entry (unreachable: it
  // died, as the client learnt from etcd) and both survivors listing it as
  // a dead peer.
  static bool ShowsWorker0Dead(const std::vector<Value>& status) {
    if (status.size() != kWorld) return false;
    const Value* state = status[0].Find("state");
    const Value* error = status[0].Find("error");
    if (state == nullptr || state->as_string() != "unreachable" ||
        error == nullptr ||
        error->as_string().find("worker0 died") == std::string::npos) {
      return false;
    }
    for (int r : {1, 2}) {
      const Value* dead = status[r].Find("dead_peers");
      if (dead == nullptr || !dead->is_list() ||
          ToJson(*dead).find("\"worker0\"") == std::string::npos) {
        return false;
      }
    }
    return true;
  }
};

TEST_F(EtcdFailoverTest, AnEtcdMemberAndWorkerZeroDieTheJobGoesOn) {
  for (int r = 0; r < kWorld; ++r) {
    workers_.push_back(StartWorker(r, absl::StrCat("worker", r)));
  }
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(AwaitReady(absl::StrCat("worker", r), *workers_[r]));
  }
  ASSERT_EQ(Status().size(), static_cast<size_t>(kWorld));

  // The etcd leader and worker0 go at once.
  ASSERT_OK_AND_ASSIGN(int leader, etcd_->LeaderIndex());
  const pid_t worker0 = workers_[0]->pid();
  ASSERT_OK(etcd_->Kill(leader));
  ASSERT_EQ(kill(worker0, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(WaitForPidGone(worker0, kWait));

  // The survivors serve calls (worker1 fetches a value worker2 owns) and
  // run collectives among themselves.
  const std::string script = OutputPath("survivors.ferry");
  std::ofstream(script) << "R = remote worker2 add [40, 2]\n"
                           "X = call worker1 to_here [$R]\n"
                           "expect $X 42\n";
  ProcessResult run = Ctl({"run", script});
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  ProcessResult pair = Ctl({"collective", "all_reduce"},
                           R"({"ranks": [null, {"dtype":"float32","data":[2]},
                        {"dtype":"float32","data":[3]}],
              "group": [1, 2], "op": "sum"})");
  EXPECT_EQ(pair.exit_code, 0) << pair.Describe();
  EXPECT_THAT(pair.out, HasSubstr(R"({"dtype":"float32","data":[5]})"));

  // Once its lease expired, everyone knows worker0 is dead.
  std::vector<Value> status;
  AwaitTrue(
      [&] {
        status = Status();
        return ShowsWorker0Dead(status);
      },
      kWait);
  ASSERT_TRUE(ShowsWorker0Dead(status))
      << (status.empty() ? "no status" : ToJson(Value(status)));
  PrintTiming("worker0's death known to ferryctl status after the kills",
              absl::Now() - killed);
  EXPECT_FALSE(workers_[1]->Exited());
  EXPECT_FALSE(workers_[2]->Exited());

  // A replacement rejoins (through the etcd members left): started
  // without a rank, it takes the free one, worker0's.
  const absl::Time restarted = absl::Now();
  workers_[0] = StartWorker(-1, "worker0.replacement");
  ASSERT_TRUE(AwaitReady("worker0.replacement", *workers_[0]))
      << "the replacement exited: see worker0.replacement.log";
  PrintTiming("the replacement worker0 joined after its start",
              absl::Now() - restarted);
  ProcessResult call = Ctl({"call", "worker0", "add", "[1, 2]"});
  EXPECT_EQ(call.exit_code, 0) << call.Describe();

  // A world all_reduce includes it.
  const absl::Time reduce_start = absl::Now();
  ProcessResult world = Ctl({"collective", "all_reduce"},
                            R"({"ranks": [{"dtype":"float32","data":[1]},
                        {"dtype":"float32","data":[2]},
                        {"dtype":"float32","data":[3]}], "op": "sum"})");
  PrintTiming("a world all_reduce with the replacement (ferryctl, end to end)",
              absl::Now() - reduce_start);
  EXPECT_EQ(world.exit_code, 0) << world.Describe();
  EXPECT_THAT(world.out, HasSubstr(R"({"dtype":"float32","data":[6]})"));
  status = Status();
  ASSERT_EQ(status.size(), static_cast<size_t>(kWorld));
  EXPECT_EQ(status[0].Find("pid")->as_int(), workers_[0]->pid());
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(status[r].Find("state")->as_string(), "running") << r;
  }

  // And the job still ends as a whole, with one etcd member down.
  ProcessResult down = Ctl({"down"});
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
  for (int r = 0; r < kWorld; ++r) {
    ProcessResult exited = workers_[r]->Wait(kWait);
    EXPECT_EQ(exited.exit_code, 0) << "worker" << r;
  }
}

}  // namespace
}  // namespace ferry
