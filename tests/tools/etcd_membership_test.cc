// Membership in etcd on real processes: three ferryd daemons joined through
// a real etcd (tests/testing/etcd_cluster.h), worker0 killed with SIGKILL.
// With etcd no rank is special: worker1 and worker2 go on serving (a call
// from worker1 to worker2 succeeds), and once etcd expired worker0's lease
// a replacement worker0 takes the rank and serves calls.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/membership/etcd/etcd_client.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::BackgroundProcess;
using ::ferry::testing::EtcdCluster;
using ::ferry::testing::ProcessOptions;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::ferry::testing::RunProcess;
using ::ferry::testing::WaitForPidGone;
using ::testing::HasSubstr;

constexpr int kWorld = 3;
// The workers' lease TTL: twice etcd's smallest (2 s), so a loaded machine
// stalling etcd or a worker for a second does not expire the survivors'
// leases; the test waits one TTL for worker0's.
constexpr int64_t kHeartbeatMs = 4000;
// Bound on any one step (processes starting, leases expiring).
constexpr absl::Duration kWait = absl::Seconds(30);

void PrintTiming(const std::string& what, absl::Duration d) {
  std::cout << "[timing] " << what << ": " << absl::FormatDuration(d)
            << std::endl;
}

class EtcdMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    ASSERT_OK_AND_ASSIGN(etcd_, EtcdCluster::Start());
    rendezvous_ = absl::StrCat("etcd://", etcd_->endpoints(), "/e2e");
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = tmp != nullptr ? tmp : "/tmp";
  }

  void TearDown() override {
    workers_.clear();  // SIGKILL and reap.
    etcd_.reset();
  }

  std::unique_ptr<BackgroundProcess> StartWorker(int rank,
                                                 const std::string& log) {
    ProcessOptions options;
    // Kept with the test's outputs, for a failure's post-mortem.
    const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    options.output_file =
        absl::StrCat(outputs != nullptr ? outputs : dir_, "/", log);
    options.die_with_parent = true;
    auto p = BackgroundProcess::Start(
        {Runfile("tools/ferryd"), absl::StrCat("--rendezvous=", rendezvous_),
         absl::StrCat("--rank=", rank), absl::StrCat("--world_size=", kWorld),
         absl::StrCat("--heartbeat_timeout_ms=", kHeartbeatMs), "--insecure"},
        options);
    EXPECT_OK(p.status());
    return p.ok() ? *std::move(p) : nullptr;
  }

  // `ferryctl --rendezvous=… ARGS`: registers through etcd, so it waits
  // (bounded) until every rank is held.
  ProcessResult Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {Runfile("tools/ferryctl"),
                                     absl::StrCat("--rendezvous=", rendezvous_),
                                     "--insecure", "--timeout_ms=20000"};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<ProcessResult> r = RunProcess(argv, {}, kWait);
    EXPECT_OK(r.status());
    return r.ok() ? *r : ProcessResult{};
  }

  // Until etcd deleted `key` (its holder's lease expired), bounded.
  void WaitKeyGone(const std::string& key) {
    EtcdOptions options;
    options.endpoints = etcd_->endpoint_list();
    ASSERT_OK_AND_ASSIGN(auto etcd, EtcdClient::Connect(options));
    ASSERT_OK_AND_ASSIGN(EtcdRange now, etcd->Get(key).Wait(kWait));
    if (now.kvs.empty()) return;
    absl::Mutex mu;
    bool gone = false;
    auto watch =
        etcd->WatchPrefix(key, now.revision + 1,
                          {.on_events = [&](std::vector<EtcdEvent> events) {
                            absl::MutexLock lock(&mu);
                            for (const EtcdEvent& e : events) {
                              if (e.type == EtcdEvent::Type::kDelete)
                                gone = true;
                            }
                          }});
    {
      absl::MutexLock lock(&mu);
      EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&gone), kWait))
          << key << " still held";
    }
    watch->Stop();
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::string rendezvous_;
  std::string dir_;
  std::vector<std::unique_ptr<BackgroundProcess>> workers_;
};

TEST_F(EtcdMembershipTest, WorkerZeroDiesTheOthersGoOnAndAReplacementRejoins) {
  for (int r = 0; r < kWorld; ++r) {
    workers_.push_back(StartWorker(r, absl::StrCat("worker", r, ".log")));
  }
  ProcessResult status = Ctl({"status", "--format=json"});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(status.out, HasSubstr("\"worker2\"")) << status.out;

  const pid_t worker0 = workers_[0]->pid();
  ASSERT_EQ(kill(worker0, SIGKILL), 0);
  ASSERT_TRUE(WaitForPidGone(worker0, kWait));
  const absl::Time killed = absl::Now();

  // worker1 fetches a value worker2 owns: a call from worker1 to worker2.
  const std::string script = absl::StrCat(dir_, "/survivors.ferry");
  {
    std::ofstream out(script);
    out << "R = remote worker2 add [40, 2]\n"
           "X = call worker1 to_here [$R]\n"
           "expect $X 42\n";
  }
  ProcessResult run = Ctl({"run", script});
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  // The survivors did not end with worker0.
  EXPECT_FALSE(workers_[1]->Exited());
  EXPECT_FALSE(workers_[2]->Exited());

  WaitKeyGone("/ferry/e2e/ranks/0");
  PrintTiming("worker0's lease expired after the kill", absl::Now() - killed);
  const absl::Time replaced = absl::Now();
  workers_[0] = StartWorker(0, "worker0.replacement.log");
  ProcessResult call = Ctl({"call", "worker0", "add", "[1, 2]"});
  EXPECT_EQ(call.exit_code, 0) << call.Describe();
  EXPECT_THAT(call.out, HasSubstr("3")) << call.out;
  PrintTiming("replacement joined and answered", absl::Now() - replaced);

  // The survivors reach the new incarnation, and it reaches them: worker1
  // fetches from worker0 and worker0 from worker2.
  const std::string rejoined = absl::StrCat(dir_, "/rejoined.ferry");
  {
    std::ofstream out(rejoined);
    out << "A = remote worker0 add [40, 2]\n"
           "X = call worker1 to_here [$A]\n"
           "expect $X 42\n"
           "B = remote worker2 add [1, 2]\n"
           "Y = call worker0 to_here [$B]\n"
           "expect $Y 3\n";
  }
  run = Ctl({"run", rejoined});
  EXPECT_EQ(run.exit_code, 0) << run.Describe();

  // A graceful shutdown agrees through etcd barriers; every worker exits.
  ProcessResult down = Ctl({"down"});
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
  for (int r = 0; r < kWorld; ++r) {
    ProcessResult exited = workers_[r]->Wait(kWait);
    EXPECT_EQ(exited.exit_code, 0)
        << "worker" << r << ": " << exited.Describe();
  }
}

}  // namespace
}  // namespace ferry
