// Faults on real ferryd workers, each on a host of its own (a network
// namespace, tests/testing/netns.h): kill -9 of any rank mid-call,
// mid-collective and while owning or holding RRefs, partitions (a link
// taken down: silence, no resets) and pauses (SIGSTOP) shorter and longer
// than the heartbeat timeout. This test process is the client, on a host
// of its own ("client"). Times appear only as generous bounds for "it
// ended", never as expectations.
#include <signal.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/client/service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/auth/security.h"
#include "rpc/value/tensor.h"
#include "rref/rref.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/net_job.h"
#include "tests/testing/netns.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::KillProcess;
using ::ferry::testing::NetJob;
using ::ferry::testing::PauseProcess;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::ResumeProcess;
using ::ferry::testing::Runfile;
using ::ferry::testing::StatusIs;
using ::ferry::testing::TestNetwork;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int64_t kHeartbeatMs = 2000;

// A worker's log once it ended the job for itself: fenced by the master, or
// out of contact with the master for the heartbeat timeout.
::testing::Matcher<std::string> EndedByItself() {
  return ::testing::AnyOf(HasSubstr("fenced"), HasSubstr("master_lost"));
}
const absl::Duration kHeartbeat = absl::Milliseconds(kHeartbeatMs);
// "It ended": a bound many heartbeats long, so only a hang exceeds it.
constexpr absl::Duration kEnded = absl::Seconds(30);
// A fault shorter than the heartbeat timeout (a blip).
const absl::Duration kBlip = kHeartbeat / 3;

// One network for the whole suite: this process enters its "client" host
// before gRPC starts a thread, so every gRPC thread is there.
TestNetwork* net = nullptr;

class ChaosTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!TestNetwork::Available().ok()) return;
    auto created = TestNetwork::Create({"w0", "w1", "w2", "client", "other"});
    if (!created.ok()) {
      std::cerr << "cannot create the test network: " << created.status();
      return;
    }
    net = created->release();
    if (absl::Status s = net->Enter("client"); !s.ok()) {
      std::cerr << "cannot enter the client host: " << s;
      delete net;
      net = nullptr;
      return;
    }
    // Each test's client is destroyed before the next one's is made.
  }
  static void TearDownTestSuite() {
    delete net;
    net = nullptr;
  }

  void SetUp() override {
    if (absl::Status s = TestNetwork::Available(); !s.ok()) GTEST_SKIP() << s;
    ASSERT_NE(net, nullptr) << "the test network could not be made";
    const std::string dir = absl::StrCat(
        std::getenv("TEST_TMPDIR"), "/",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_OK_AND_ASSIGN(
        job_,
        NetJob::Start(
            *net,
            {.ferryd = Runfile("tools/ferryd"),
             .hosts = {"w0", "w1", "w2"},
             .flags = {absl::StrCat("--heartbeat_timeout_ms=", kHeartbeatMs),
                       "--rref_lease_ms=3000", "--shutdown_timeout_ms=3000"},
             .dir = dir}));
    RpcClientOptions o;
    o.master = job_->master();
    o.description = "chaos_test";
    ASSERT_OK_AND_ASSIGN(o.security, Security::Load({.insecure = true}));
    ASSERT_OK_AND_ASSIGN(client_, ClientImpl::Connect(o));
  }

  void TearDown() override {
    if (client_ != nullptr) client_->Close(/*leave=*/false);
    client_.reset();
    if (job_ != nullptr) job_->KillAll();
    if (net != nullptr) {
      EXPECT_OK(net->HealAll());
      // Nothing a test started may outlive it (this process excepted).
      EXPECT_THAT(net->Processes(), IsEmpty());
    }
  }

  RpcClient& rpc() { return client_->rpc(); }

  absl::StatusOr<proto::WorkerStatus> Status(int rank) {
    return rpc().GetStatus(absl::StrCat("worker", rank), absl::Seconds(10));
  }

  // Whether `done` held within `bound` (status calls: looked at every 50 ms).
  static bool Eventually(const std::function<bool()>& done,
                         absl::Duration bound = kEnded) {
    return AwaitTrue(done, bound, absl::Milliseconds(50));
  }

  // Whether rank `observer` lists worker `dead` among its dead peers.
  bool SeesDead(int observer, int dead) {
    absl::StatusOr<proto::WorkerStatus> s = Status(observer);
    return s.ok() &&
           absl::c_linear_search(s->dead_peers(), absl::StrCat("worker", dead));
  }

  // Waits until `rank` has `n` calls executing (so a fault lands mid-call).
  bool AwaitIncoming(int rank, int n) {
    return Eventually([&] {
      absl::StatusOr<proto::WorkerStatus> s = Status(rank);
      return s.ok() && s->inflight_incoming() >= n;
    });
  }

  int64_t Owned(int rank) {
    absl::StatusOr<proto::WorkerStatus> s = Status(rank);
    return s.ok() ? s->owned_rrefs() : -1;
  }

  // Every rank alive serves a call, and none of them knows of a death.
  void ExpectWholeJobServes() {
    for (int r = 0; r < job_->world_size(); ++r) {
      EXPECT_OK(rpc()
                    .RpcSync(absl::StrCat("worker", r), "echo", {r},
                             {.timeout = kEnded})
                    .status());
      ASSERT_OK_AND_ASSIGN(proto::WorkerStatus s, Status(r));
      EXPECT_THAT(s.dead_peers(), IsEmpty()) << "worker" << r;
      EXPECT_THAT(job_->log(r), Not(HasSubstr("fenced"))) << "worker" << r;
    }
  }

  // A collective started on the ranks in `joined` only (the others are in
  // the op but never join it): one future per joined rank.
  std::vector<Future<Value>> PartialAllReduce(const std::vector<int>& joined) {
    std::vector<Future<Value>> ops;
    // A client's op ids are its own: "<its node>.<anything>".
    const std::string op_id =
        absl::StrCat(rpc().node(), ".chaos.", ++op_counter_);
    for (int r : joined) {
      ops.push_back(
          rpc().RpcAsync(absl::StrCat("worker", r), kCollectiveFunction,
                         {Value(std::string("all_reduce")), Value(op_id),
                          Value(Tensor::FromVector<float>({1})),
                          Value(Value::Map{{"op", Value(std::string("sum"))}}),
                          Value(int64_t{60000})},
                         {.timeout = absl::Seconds(90)}));
    }
    return ops;
  }

  std::unique_ptr<NetJob> job_;
  std::unique_ptr<ClientImpl> client_;
  int op_counter_ = 0;
};

TEST_F(ChaosTest, KilledWorkerFailsThePendingCallNamingIt) {
  Future<Value> call = rpc().RpcAsync("worker1", "sleep_ms", {60000},
                                      {.timeout = absl::Seconds(90)});
  ASSERT_TRUE(AwaitIncoming(1, 1));
  ASSERT_OK(KillProcess(job_->pid(1)));
  EXPECT_THAT(call.Wait(kEnded),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker1")));
  EXPECT_THAT(rpc().RpcSync("worker1", "echo", {1}, {.timeout = kEnded}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker1")));
  EXPECT_OK(
      rpc().RpcSync("worker2", "echo", {2}, {.timeout = kEnded}).status());
  EXPECT_TRUE(Eventually([&] { return SeesDead(0, 1); }));
}

// No headless job: rank 0 (the embedded master) dies; within the heartbeat
// timeout the survivors fail their pending ops and the client's pending
// call naming worker0, and exit 1 by themselves, saying why.
TEST_F(ChaosTest, KilledRankZeroEndsTheJobNamingIt) {
  Future<Value> call = rpc().RpcAsync("worker1", "sleep_ms", {60000},
                                      {.timeout = absl::Seconds(90)});
  std::vector<Future<Value>> ops = PartialAllReduce({1, 2});
  // Both ops running (each worker serving its call) before the kill: a
  // call still on its way to worker2 when the job ends finds it gone and
  // names worker2 (seen once in a fresh-clone CI beside a CPU hog).
  ASSERT_TRUE(AwaitIncoming(1, 2));
  ASSERT_TRUE(AwaitIncoming(2, 1));
  ASSERT_OK(KillProcess(job_->pid(0)));
  for (Future<Value>& op : ops) {
    EXPECT_THAT(op.Wait(kEnded),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker0")));
  }
  EXPECT_THAT(call.Wait(kEnded),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker0")));
  for (int r : {1, 2}) {
    ProcessResult exit = job_->WaitExit(r, kEnded);
    EXPECT_FALSE(exit.timed_out) << "worker" << r << " still runs headless";
    EXPECT_EQ(exit.term_signal, 0) << "worker" << r;
    EXPECT_NE(exit.exit_code, 0) << "worker" << r;
    EXPECT_THAT(job_->log(r), HasSubstr("worker0")) << "worker" << r;
  }
}

// A partition shorter than the heartbeat timeout is a blip: nobody is
// declared dead, and a call that was running across it completes.
TEST_F(ChaosTest, ShortPartitionDeclaresNobodyDead) {
  Future<Value> across = rpc().RpcAsync("worker2", "sleep_ms", {kHeartbeatMs},
                                        {.timeout = kEnded});
  ASSERT_TRUE(AwaitIncoming(2, 1));
  ASSERT_OK(net->Partition("w2"));
  absl::SleepFor(kBlip);  // The fault's length, not a wait for an outcome.
  ASSERT_OK(net->Heal("w2"));
  EXPECT_OK(across.Wait(kEnded).status());
  ExpectWholeJobServes();
}

// A partition longer than the heartbeat timeout: the worker is declared
// dead (calls to it fail naming it), the others keep serving, and the
// worker exits by itself: cut off, it cannot tell a dead master from a
// partition, so it gives up on the master after the same timeout (or, if
// the link is back first, learns it was fenced).
TEST_F(ChaosTest, LongPartitionFencesTheWorkerAndTheOthersServe) {
  ASSERT_OK(net->Partition("w2"));
  EXPECT_TRUE(Eventually([&] { return SeesDead(0, 2); }));
  EXPECT_THAT(rpc().RpcSync("worker2", "echo", {1}, {.timeout = kEnded}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  EXPECT_OK(
      rpc().RpcSync("worker1", "echo", {1}, {.timeout = kEnded}).status());
  ASSERT_OK(net->Heal("w2"));
  ProcessResult exit = job_->WaitExit(2, kEnded);
  EXPECT_FALSE(exit.timed_out) << "worker2 was not fenced:\n" << job_->log(2);
  EXPECT_EQ(exit.term_signal, 0);
  EXPECT_THAT(job_->log(2), EndedByItself());
  EXPECT_OK(
      rpc().RpcSync("worker1", "echo", {2}, {.timeout = kEnded}).status());
  EXPECT_THAT(rpc().RpcSync("worker2", "echo", {2}, {.timeout = kEnded}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
}

TEST_F(ChaosTest, ShortPauseDeclaresNobodyDead) {
  ASSERT_OK(PauseProcess(job_->pid(2)));
  absl::SleepFor(kBlip);  // The fault's length.
  ASSERT_OK(ResumeProcess(job_->pid(2)));
  ExpectWholeJobServes();
}

// A worker paused past the heartbeat timeout is declared dead; resumed, it
// exits by itself (it learns it was fenced, or its own watch of the master,
// which fires first on waking, gives up). The others keep serving.
TEST_F(ChaosTest, LongPauseFencesTheWorkerAndTheOthersServe) {
  ASSERT_OK(PauseProcess(job_->pid(2)));
  EXPECT_TRUE(Eventually([&] { return SeesDead(0, 2); }));
  EXPECT_THAT(rpc().RpcSync("worker2", "echo", {1}, {.timeout = kEnded}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  EXPECT_OK(
      rpc().RpcSync("worker1", "echo", {1}, {.timeout = kEnded}).status());
  ASSERT_OK(ResumeProcess(job_->pid(2)));
  ProcessResult exit = job_->WaitExit(2, kEnded);
  EXPECT_FALSE(exit.timed_out) << "worker2 was not fenced:\n" << job_->log(2);
  EXPECT_EQ(exit.term_signal, 0);
  EXPECT_THAT(job_->log(2), EndedByItself());
  EXPECT_OK(
      rpc().RpcSync("worker1", "echo", {2}, {.timeout = kEnded}).status());
}

// Ranks 0 and 1 are in an all_reduce waiting for rank 2, which dies: both
// fail UNAVAILABLE naming it (not a timeout a minute later).
TEST_F(ChaosTest, KilledRankFailsTheCollectiveOnEveryOtherRank) {
  std::vector<Future<Value>> ops = PartialAllReduce({0, 1});
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<proto::WorkerStatus> s0 = Status(0), s1 = Status(1);
    return s0.ok() && s1.ok() && s0->collectives_inflight() > 0 &&
           s1->collectives_inflight() > 0;
  }));
  ASSERT_OK(KillProcess(job_->pid(2)));
  for (Future<Value>& op : ops) {
    EXPECT_THAT(op.Wait(kEnded),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  }
  EXPECT_OK(
      rpc().RpcSync("worker1", "echo", {1}, {.timeout = kEnded}).status());
}

// The owner of RRefs this client holds dies: every copy fails UNAVAILABLE
// "owner worker2 died", and a fetch in flight fails naming it.
TEST_F(ChaosTest, KilledOwnerFailsTheCopiesHeld) {
  ASSERT_OK_AND_ASSIGN(RRef held,
                       client_->rrefs().Remote("worker2", "arange", {3}));
  ASSERT_OK(held.ToHere().status());
  ASSERT_OK_AND_ASSIGN(RRef slow,
                       client_->rrefs().Remote("worker2", "sleep_ms", {60000}));
  Future<Value> fetching = slow.ToHereAsync();
  ASSERT_OK(KillProcess(job_->pid(2)));
  EXPECT_THAT(fetching.Wait(kEnded),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  absl::StatusOr<Value> v;
  EXPECT_TRUE(Eventually([&] {
    v = held.ToHere();
    return absl::StrContains(v.status().message(), "owner worker2 died");
  })) << v.status();
  EXPECT_THAT(v, StatusIs(absl::StatusCode::kUnavailable,
                          HasSubstr("owner worker2 died")));
}

// A client process holding RRefs on worker1 is killed -9 on its own host:
// worker1 drops its forks within the lease, and its table is empty again.
TEST_F(ChaosTest, KilledClientLosesItsRRefs) {
  const std::string script =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/hold.ferry");
  {
    std::ofstream out(script);
    for (int i = 0; i < 20; ++i)
      out << "R" << i << " = remote worker1 echo [" << i << "]\n";
    out << "X = fetch $R19\nsleep 600000\n";
  }
  ASSERT_OK_AND_ASSIGN(
      auto holder,
      net->Start("other",
                 {Runfile("tools/ferryctl"), "--insecure",
                  absl::StrCat("--master=", job_->master()), "run", script}));
  ASSERT_TRUE(Eventually([&] { return Owned(1) == 20; })) << Owned(1);
  ASSERT_OK(KillProcess(holder->pid()));
  holder->Wait(kEnded);
  EXPECT_TRUE(Eventually([&] { return Owned(1) == 0; })) << Owned(1);
}

}  // namespace
}  // namespace ferry
