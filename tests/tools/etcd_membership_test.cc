// Membership in etcd on real processes: ferryd daemons joined through a
// real etcd (tests/testing/etcd_cluster.h).
// - worker0 killed with SIGKILL: with etcd no rank is special, worker1 and
//   worker2 go on serving, and once etcd expired worker0's lease a
//   replacement worker0 takes the rank and serves calls;
// - workers started without a rank take the first free ones;
// - etcd unreachable at start: ferryd fails within its startup timeout,
//   naming the endpoints;
// - etcd lost for less than the TTL: nothing happens;
// - one worker cut off from etcd (a TCP proxy that stops forwarding) for
//   longer than the TTL: the others declare it dead, and it exits.
// Waits for leases are real (etcd's): bounded, never asserted on.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/membership/etcd/etcd_client.h"
#include "rpc/value/json.h"
#include "rref/rref.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/etcd_job.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/tcp_proxy.h"
#include "tools/runtime/rendezvous.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::BackgroundProcess;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::ferry::testing::RunProcess;
using ::ferry::testing::TcpProxy;
using ::ferry::testing::WaitForPidGone;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr int kWorld = 3;
// The workers' lease TTL: twice etcd's smallest (2 s), so a loaded machine
// stalling etcd or a worker for a second does not expire the survivors'
// leases; the test waits one TTL for worker0's.
constexpr int64_t kHeartbeatMs = 4000;
// Bound on any one step (processes starting, leases expiring).
constexpr absl::Duration kWait = absl::Seconds(30);

class EtcdMembershipTest : public ::ferry::testing::EtcdJobTest {
 protected:
  EtcdMembershipTest()
      : EtcdJobTest({.job = "e2e",
                     .world_size = kWorld,
                     .heartbeat_ms = kHeartbeatMs,
                     .wait = kWait}) {}

  // Whether worker `rank` lists `dead` among its dead peers (per status).
  static bool SeesDead(const std::vector<Value>& status, int rank,
                       const std::string& dead) {
    if (rank >= static_cast<int>(status.size())) return false;
    const Value* peers = status[rank].Find("dead_peers");
    if (peers == nullptr || !peers->is_list()) return false;
    for (const Value& p : peers->as_list()) {
      if (p.is_string() && p.as_string() == dead) return true;
    }
    return false;
  }

  static std::string ReadLog(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
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
};

TEST_F(EtcdMembershipTest, WorkerZeroDiesTheOthersGoOnAndAReplacementRejoins) {
  for (int r = 0; r < kWorld; ++r) {
    workers_.push_back(StartWorker(r, absl::StrCat("worker", r)));
  }
  // Joined, not only registered: worker0 dies after the job formed.
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(AwaitReady(absl::StrCat("worker", r), *workers_[r]));
  }
  ProcessResult status = Ctl({"status", "--format=json"});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(status.out, HasSubstr("\"worker2\"")) << status.out;

  const pid_t worker0 = workers_[0]->pid();
  ASSERT_EQ(kill(worker0, SIGKILL), 0);
  ASSERT_TRUE(WaitForPidGone(worker0, kWait));
  const absl::Time killed = absl::Now();

  // worker1 fetches a value worker2 owns: a call from worker1 to worker2.
  const std::string script = OutputPath("survivors.ferry");
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
  workers_[0] = StartWorker(0, "worker0.replacement");
  ASSERT_TRUE(AwaitReady("worker0.replacement", *workers_[0]));
  ProcessResult call = Ctl({"call", "worker0", "add", "[1, 2]"});
  EXPECT_EQ(call.exit_code, 0) << call.Describe();
  EXPECT_THAT(call.out, HasSubstr("3")) << call.out;
  PrintTiming("replacement joined and answered", absl::Now() - replaced);

  // The survivors reach the new incarnation, and it reaches them: worker1
  // fetches from worker0 and worker0 from worker2.
  const std::string rejoined = OutputPath("rejoined.ferry");
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

namespace ferry {
namespace {

// Without --rank, each worker takes the first free rank by transaction
// (before it serves: every layer is built for it), named after it.
TEST_F(EtcdMembershipTest, WorkersWithoutARankTakeTheFirstFreeOnes) {
  for (int i = 0; i < kWorld; ++i) {
    workers_.push_back(StartWorker(-1, absl::StrCat("unranked", i)));
  }
  std::vector<Value> status = Status();
  ASSERT_EQ(status.size(), static_cast<size_t>(kWorld));
  std::vector<int64_t> pids;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(status[r].Find("name")->as_string(), absl::StrCat("worker", r));
    EXPECT_EQ(status[r].Find("rank")->as_int(), r);
    pids.push_back(status[r].Find("pid")->as_int());
  }
  EXPECT_THAT(pids, UnorderedElementsAre(workers_[0]->pid(), workers_[1]->pid(),
                                         workers_[2]->pid()));
  // A fourth finds every rank held.
  std::unique_ptr<BackgroundProcess> extra = StartWorker(-1, "extra");
  ProcessResult refused = extra->Wait(kWait);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(ReadLog(WorkerLog("extra")),
              HasSubstr("is held by a live worker"));
}

// etcd unreachable at start: a clear error naming every endpoint, within
// the startup timeout, and a non-zero exit.
TEST_F(EtcdMembershipTest, UnreachableEtcdFailsTheStartNamingTheEndpoints) {
  const std::string a =
      absl::StrCat("127.0.0.1:", ::ferry::testing::UnusedPort());
  const std::string b =
      absl::StrCat("127.0.0.1:", ::ferry::testing::UnusedPort());
  const absl::Time started = absl::Now();
  absl::StatusOr<ProcessResult> r = RunProcess(
      {Runfile("tools/ferryd"),
       absl::StrCat("--rendezvous=etcd://", a, ",", b, "/nowhere"), "--rank=0",
       "--world_size=1", "--startup_timeout_ms=2000", "--insecure"},
      {}, kWait);
  ASSERT_OK(r.status());
  PrintTiming("ferryd gave up on an unreachable etcd after",
              absl::Now() - started);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_THAT(r->err, HasSubstr("ferryd: UNAVAILABLE"));
  EXPECT_THAT(r->err, HasSubstr(a));
  EXPECT_THAT(r->err, HasSubstr(b));
}

// etcd goes away for less than the TTL (its only member killed, then
// restarted on its data): the job does not notice. Calls go on meanwhile
// (a client that asked worker1 for the directory), and once a whole TTL
// has passed since etcd went away, nobody was declared dead or fenced.
TEST_F(EtcdMembershipTest, LosingEtcdForLessThanTheTtlChangesNothing) {
  constexpr int64_t kTtlMs = 10000;
  for (int r = 0; r < kWorld; ++r) {
    workers_.push_back(StartWorker(r, absl::StrCat("outage", r), kTtlMs));
  }
  // Joined, not only registered: a worker still joining when etcd goes
  // away would hold calls until it could finish (the race a CI run met).
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(AwaitReady(absl::StrCat("outage", r), *workers_[r]));
  }
  std::vector<Value> status = Status();
  ASSERT_EQ(status.size(), static_cast<size_t>(kWorld));
  // A client registered through etcd before it goes away (with a lease of
  // its own, as long as the workers').
  RpcClientOptions options;
  ASSERT_OK_AND_ASSIGN(options.membership_backend,
                       BackendFactoryFor({.url = rendezvous_,
                                          .ttl = absl::Milliseconds(kTtlMs)}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientImpl> client,
                       ClientImpl::Connect(options));

  const absl::Time lost = absl::Now();
  ASSERT_OK(etcd_->Kill(0));
  // Calls, and a worker fetching a value another owns, need no etcd.
  EXPECT_OK(client->rpc().RpcSync("worker2", "add", {1, 2}));
  {
    ASSERT_OK_AND_ASSIGN(RRef r, client->rrefs().Remote("worker2", "add",
                                                        {Value(40), Value(2)}));
    ASSERT_OK_AND_ASSIGN(
        Value x, client->rpc().RpcSync("worker1", "to_here", {r.AsValue()}));
    EXPECT_EQ(x, Value(42));
  }
  ASSERT_OK(etcd_->Restart(0));
  const absl::Duration outage = absl::Now() - lost;
  PrintTiming("etcd was away for", outage);
  if (outage >= absl::Milliseconds(kTtlMs)) {
    GTEST_SKIP() << "etcd took longer than the TTL to come back: the case "
                    "this test is about did not happen";
  }
  // Every worker renewed its lease since etcd came back: each lease now
  // outlives the moment one not renewed since the outage began would have
  // ended (as each worker's status says), so none can be lost to it —
  // waited for as that event, not as a TTL of sleep.
  const absl::Time unrenewed_end = lost + absl::Milliseconds(kTtlMs);
  ASSERT_TRUE(AwaitTrue(
      [&] {
        status = Status();
        if (status.size() != static_cast<size_t>(kWorld)) return false;
        for (const Value& w : status) {
          const Value* left = w.Find("membership_lease_ms");
          if (left == nullptr || !left->is_int() ||
              absl::Now() + absl::Milliseconds(left->as_int()) <=
                  unrenewed_end) {
            return false;
          }
        }
        return true;
      },
      kWait, absl::Milliseconds(200)))
      << "a worker's lease was not renewed since etcd came back";
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(workers_[r]->Exited()) << "worker" << r;
  }
  ASSERT_EQ(status.size(), static_cast<size_t>(kWorld));
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(status[r].Find("state")->as_string(), "running") << r;
    const Value* dead = status[r].Find("dead_peers");
    EXPECT_TRUE(dead == nullptr || dead->as_list().empty())
        << "worker" << r << ": " << ToJson(status[r]);
  }
  EXPECT_OK(client->rpc().RpcSync("worker0", "add", {1, 2}));
  EXPECT_FALSE(client->rpc().membership().DownReason(0).has_value());
}

// Worker2 reaches etcd only through a proxy, which then stops forwarding
// (a partition between it and etcd; the workers still reach each other):
// after the TTL etcd expires its lease, the others declare it dead, and it
// finds itself fenced and exits (status 1, saying why).
TEST_F(EtcdMembershipTest, AWorkerCutOffFromEtcdIsDeclaredDeadAndExits) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TcpProxy> proxy,
                       TcpProxy::Start(etcd_->endpoint(0)));
  workers_.push_back(StartWorker(0, "cut0"));
  workers_.push_back(StartWorker(1, "cut1"));
  workers_.push_back(
      StartWorker(2, "cut2", kHeartbeatMs,
                  absl::StrCat("etcd://", proxy->address(), "/e2e")));
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(AwaitReady(absl::StrCat("cut", r), *workers_[r]));
  }
  ASSERT_EQ(Status().size(), static_cast<size_t>(kWorld));

  const absl::Time cut = absl::Now();
  proxy->Cut();
  ProcessResult ended = workers_[2]->Wait(kWait);
  PrintTiming("worker2, cut off from etcd, exited after", absl::Now() - cut);
  EXPECT_FALSE(ended.timed_out);
  EXPECT_EQ(ended.exit_code, 1);
  const std::string log = ReadLog(WorkerLog("cut2"));
  EXPECT_THAT(log, HasSubstr("fenced"));
  EXPECT_THAT(log, HasSubstr("etcd lease"));

  std::vector<Value> status;
  AwaitTrue(
      [&] {
        status = Status();
        return SeesDead(status, 0, "worker2") && SeesDead(status, 1, "worker2");
      },
      kWait);
  EXPECT_TRUE(SeesDead(status, 0, "worker2"));
  EXPECT_TRUE(SeesDead(status, 1, "worker2"));
  PrintTiming("the others saw worker2 dead after", absl::Now() - cut);
  EXPECT_FALSE(workers_[0]->Exited());
  EXPECT_FALSE(workers_[1]->Exited());
  ProcessResult call = Ctl({"call", "worker1", "add", "[1, 2]"});
  EXPECT_EQ(call.exit_code, 0) << call.Describe();
  ProcessResult to_dead = Ctl({"call", "worker2", "add", "[1, 2]"});
  EXPECT_EQ(to_dead.exit_code, 1);
  EXPECT_THAT(to_dead.err, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace ferry
