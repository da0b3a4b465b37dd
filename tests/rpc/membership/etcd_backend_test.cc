// EtcdBackend against a real single-member etcd started by the test
// (tests/testing/etcd_cluster.h): ranks taken by transaction, a live rank
// refused, jobs formed, deaths and departures published by the watch,
// fencing, clients and barriers. Each test uses its own job name.
//
// Deaths are caused by revoking a node's lease (what etcd does when the
// TTL runs out), so no test waits for a TTL.
#include "rpc/membership/etcd_backend.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/membership/membership.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::EtcdCluster;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// Bound on any single wait in these tests.
constexpr absl::Duration kWait = absl::Seconds(15);

// Records nodes published as gone.
class DownLog {
 public:
  explicit DownLog(Membership* m) {
    m->AddListener([this](uint64_t node, const absl::Status& why) {
      absl::MutexLock lock(&mu_);
      down_.emplace_back(node, why);
    });
  }
  // The reason `node` went down, waiting (bounded) for it.
  std::optional<absl::Status> WaitFor(uint64_t node) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return Find(node).has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&seen), kWait);
    return Find(node);
  }

 private:
  std::optional<absl::Status> Find(uint64_t node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [n, why] : down_) {
      if (n == node) return why;
    }
    return std::nullopt;
  }
  absl::Mutex mu_;
  std::vector<std::pair<uint64_t, absl::Status>> down_ ABSL_GUARDED_BY(mu_);
};

class EtcdBackendTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { etcd_.reset(); }

  void SetUp() override {
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    if (etcd_ == nullptr) {
      auto started = EtcdCluster::Start();
      ASSERT_TRUE(started.ok()) << started.status();
      etcd_ = *std::move(started);
    }
    job_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  std::unique_ptr<EtcdBackend> Backend() {
    EtcdBackendOptions options;
    options.etcd.endpoints = etcd_->endpoint_list();
    options.job = job_;
    options.ttl = absl::Seconds(2);
    auto backend = EtcdBackend::Connect(options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *std::move(backend) : nullptr;
  }

  // A worker's spec; its public key (not checked by the backend) names
  // its rank.
  static JoinSpec Spec(int rank, int world_size) {
    return JoinSpec{.self = {absl::StrCat("worker", rank), rank,
                             absl::StrCat("127.0.0.1:", 4000 + rank), "",
                             "host", 100 + rank, KeyOf(rank)},
                    .world_size = world_size,
                    .incarnation = 7u + static_cast<uint64_t>(rank)};
  }

  static std::string KeyOf(int rank) {
    return std::string(32, static_cast<char>('k' + rank));
  }

  // Joins `n` backends as ranks 0..n-1 concurrently.
  std::vector<std::unique_ptr<EtcdBackend>> JoinAll(int n) {
    std::vector<std::unique_ptr<EtcdBackend>> backends;
    for (int r = 0; r < n; ++r) backends.push_back(Backend());
    std::vector<absl::Status> results(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        results[r] = backends[r]->Join(Spec(r, n), kWait).status();
      });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : results) EXPECT_OK(s);
    return backends;
  }

  // Revokes a lease from outside, as etcd does when its TTL runs out.
  void Expire(int64_t lease) {
    EtcdOptions options;
    options.endpoints = etcd_->endpoint_list();
    ASSERT_OK_AND_ASSIGN(auto client, EtcdClient::Connect(options));
    ASSERT_OK(client->RevokeLease(lease).Wait(kWait).status());
  }

  static std::unique_ptr<EtcdCluster> etcd_;
  std::string job_;
};

std::unique_ptr<EtcdCluster> EtcdBackendTest::etcd_;

TEST_F(EtcdBackendTest, DirectoryListsEveryRank) {
  auto a = Backend();
  auto b = Backend();
  absl::StatusOr<Directory> dir_b;
  std::thread t([&] { dir_b = b->Join(Spec(1, 2), kWait); });
  ASSERT_OK_AND_ASSIGN(Directory dir_a, a->Join(Spec(0, 2), kWait));
  t.join();
  ASSERT_OK(dir_b.status());
  ASSERT_EQ(dir_a.world_size(), 2);
  EXPECT_EQ(dir_a.at(1).address, "127.0.0.1:4001");
  EXPECT_EQ(dir_b->at(0).address, "127.0.0.1:4000");
  EXPECT_EQ(dir_b->at(0).name, "worker0");
}

TEST_F(EtcdBackendTest, FirstFreeRankIsTaken) {
  auto a = Backend();
  auto b = Backend();
  absl::StatusOr<Directory> dir_b;
  std::thread t([&] { dir_b = b->Join(Spec(-1, 2), kWait); });
  ASSERT_OK_AND_ASSIGN(Directory dir_a, a->Join(Spec(-1, 2), kWait));
  t.join();
  ASSERT_OK(dir_b.status());
  EXPECT_THAT((std::vector<std::string>{dir_a.at(0).name, dir_a.at(1).name}),
              UnorderedElementsAre("worker0", "worker1"));
}

TEST_F(EtcdBackendTest, LiveRankCannotBeTaken) {
  auto holder = Backend();
  ASSERT_OK(holder->Join(Spec(0, 1), kWait).status());
  auto intruder = Backend();
  EXPECT_THAT(intruder->Join(Spec(0, 1), kWait).status(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       AllOf(HasSubstr("rank 0"), HasSubstr("worker0"))));
  EXPECT_THAT(
      Backend()->Join(Spec(-1, 1), kWait).status(),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("every rank")));
}

TEST_F(EtcdBackendTest, DeadRankCanBeTakenByANewIncarnation) {
  auto old = Backend();
  ASSERT_OK(old->Join(Spec(0, 1), kWait).status());
  Expire(old->lease_id());
  auto replacement = Backend();
  JoinSpec spec = Spec(0, 1);
  spec.incarnation = 99;
  EXPECT_OK(replacement->Join(spec, kWait).status());
}

// A supervisor restarts a crashed worker at once: its rank is still held
// by the dead process' lease, which runs out within a TTL. The
// replacement waits for it instead of failing with ALREADY_EXISTS.
TEST_F(EtcdBackendTest, AReplacementWaitsForItsDeadPredecessorsLease) {
  auto old = Backend();
  ASSERT_OK(old->Join(Spec(0, 1), kWait).status());
  old->Stop();  // Dies: its lease is neither renewed nor revoked.
  auto replacement = Backend();
  JoinSpec spec = Spec(0, 1);
  spec.incarnation = 99;
  ASSERT_OK_AND_ASSIGN(Directory dir, replacement->Join(spec, kWait));
  EXPECT_EQ(dir.at(0).name, "worker0");
  EXPECT_NE(replacement->lease_id(), old->lease_id());
}

TEST_F(EtcdBackendTest, WorldSizeMismatchIsRefused) {
  auto a = Backend();
  ASSERT_OK(a->Join(Spec(0, 1), kWait).status());
  EXPECT_THAT(
      Backend()->Join(Spec(1, 3), kWait).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world_size 1")));
}

TEST_F(EtcdBackendTest, JoinTimesOutNamingMissingRanksAndFreesItsRank) {
  auto a = Backend();
  EXPECT_THAT(a->Join(Spec(0, 3), absl::Milliseconds(300)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("ranks 1, 2 of 3 did not join")));
  // The rank was released at once, not after the TTL.
  EXPECT_OK(Backend()->Join(Spec(0, 1), kWait).status());
}

TEST_F(EtcdBackendTest, DeathIsPublishedAndTheDeadNodeIsFenced) {
  auto backends = JoinAll(2);
  Membership m0, m1;
  DownLog log0(&m0);
  absl::Notification fenced;
  absl::Status fenced_why;
  backends[0]->Follow(&m0, {});
  backends[1]->Follow(&m1, {.on_fenced = [&](const absl::Status& why) {
    fenced_why = why;
    fenced.Notify();
  }});
  Expire(backends[1]->lease_id());
  std::optional<absl::Status> why = log0.WaitFor(WorkerNode(1));
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, StatusIs(absl::StatusCode::kUnavailable,
                             AllOf(HasSubstr("worker1 died"),
                                   HasSubstr("etcd lease"))));
  ASSERT_TRUE(fenced.WaitForNotificationWithTimeout(kWait));
  EXPECT_THAT(fenced_why, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(EtcdBackendTest, WorkerZeroIsAnOrdinaryWorker) {
  auto backends = JoinAll(3);
  EXPECT_FALSE(backends[0]->rank0_is_master());
  Membership m1, m2;
  DownLog log1(&m1), log2(&m2);
  backends[1]->Follow(&m1, {});
  backends[2]->Follow(&m2, {});
  Expire(backends[0]->lease_id());
  ASSERT_TRUE(log1.WaitFor(WorkerNode(0)).has_value());
  ASSERT_TRUE(log2.WaitFor(WorkerNode(0)).has_value());
  // The survivors still agree on a barrier.
  absl::Status b2;
  std::thread t([&] { b2 = backends[2]->Barrier("after", kWait); });
  EXPECT_OK(backends[1]->Barrier("after", kWait));
  t.join();
  EXPECT_OK(b2);
}

TEST_F(EtcdBackendTest, AReplacementIsReportedAndRevived) {
  auto backends = JoinAll(2);
  Membership m0;
  DownLog log0(&m0);
  absl::Notification rejoined;
  WorkerInfo replacement;
  uint64_t incarnation = 0;
  backends[0]->Follow(&m0,
                      {.on_rejoined = [&](const WorkerInfo& w, uint64_t i) {
                        replacement = w;
                        incarnation = i;
                        rejoined.Notify();
                      }});
  Expire(backends[1]->lease_id());
  ASSERT_TRUE(log0.WaitFor(WorkerNode(1)).has_value());
  JoinSpec spec = Spec(1, 2);
  spec.self.address = "127.0.0.1:5001";
  spec.self.public_key = std::string(32, 'N');
  spec.incarnation = 1234;
  auto new_worker1 = Backend();
  ASSERT_OK(new_worker1->Join(spec, kWait).status());
  ASSERT_TRUE(rejoined.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(replacement.rank, 1);
  EXPECT_EQ(replacement.address, "127.0.0.1:5001");
  EXPECT_EQ(incarnation, 1234u);
  EXPECT_EQ(replacement.public_key, std::string(32, 'N'));
  // Stop() waits for the event handler, which revives the rank after the
  // callback.
  backends[0]->Stop();
  EXPECT_FALSE(m0.DownReason(WorkerNode(1)).has_value());
}

// A rank reserved before its worker serves is taken (nobody else gets it)
// but not served: the job is not formed until its holder publishes its
// address with Join.
TEST_F(EtcdBackendTest, AReservedRankIsServedOnlyOnceJoined) {
  auto early = Backend();
  JoinSpec spec = Spec(-1, 2);
  spec.self.address.clear();
  spec.self.public_key.clear();
  ASSERT_OK_AND_ASSIGN(int rank, early->ReserveRank(spec, kWait));
  EXPECT_EQ(rank, 0);
  EXPECT_THAT(Backend()->Join(Spec(0, 2), kWait).status(),
              StatusIs(absl::StatusCode::kAlreadyExists));
  auto other = Backend();
  EXPECT_THAT(other->Join(Spec(1, 2), absl::Milliseconds(500)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("ranks 0 of 2 did not join")));
  EXPECT_THAT(early->Join(Spec(1, 2), kWait).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("reserved rank 0")));
  auto late = Backend();
  absl::StatusOr<Directory> joined;
  std::thread t([&] { joined = late->Join(Spec(1, 2), kWait); });
  ASSERT_OK_AND_ASSIGN(Directory dir, early->Join(Spec(0, 2), kWait));
  t.join();
  ASSERT_OK(joined.status());
  EXPECT_EQ(joined->at(0).address, "127.0.0.1:4000");
  EXPECT_EQ(dir.at(1).address, "127.0.0.1:4001");
  // The published record carries the key the reserver joined with (it
  // once lost it: a replacement started without --rank was refused
  // UNAUTHENTICATED by every peer).
  EXPECT_EQ(joined->at(0).public_key, KeyOf(0));
  EXPECT_EQ(dir.at(1).public_key, KeyOf(1));
}

// Once the job formed, a replacement waits for nobody: two workers of
// three die, one comes back; it is the rank's next generation, and learns
// that the other is dead (named after its last holder).
TEST_F(EtcdBackendTest, AReplacementOfAFormedJobWaitsForNobody) {
  auto backends = JoinAll(3);
  Membership m0;
  DownLog log0(&m0);
  absl::Notification rejoined;
  WorkerInfo entry;
  backends[0]->Follow(&m0, {.on_rejoined = [&](const WorkerInfo& w, uint64_t) {
    entry = w;
    rejoined.Notify();
  }});
  Expire(backends[1]->lease_id());
  Expire(backends[2]->lease_id());
  ASSERT_TRUE(log0.WaitFor(WorkerNode(1)).has_value());
  ASSERT_TRUE(log0.WaitFor(WorkerNode(2)).has_value());
  // Under the rank's name only (names are fixed when the job forms).
  JoinSpec renamed = Spec(2, 3);
  renamed.self.name = "impostor";
  EXPECT_THAT(Backend()->Join(renamed, kWait).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be named worker2")));
  JoinSpec spec = Spec(1, 3);
  spec.incarnation = 1234;
  auto replacement = Backend();
  ASSERT_OK_AND_ASSIGN(Directory dir, replacement->Join(spec, kWait));
  EXPECT_EQ(dir.at(1).generation, 1u);
  EXPECT_EQ(dir.at(0).generation, 0u);
  EXPECT_EQ(dir.at(2).address, "127.0.0.1:4002");  // Its last holder's.
  Membership m1;
  replacement->Follow(&m1, {});
  EXPECT_THAT(m1.DownReason(WorkerNode(2)),
              ::testing::Optional(StatusIs(absl::StatusCode::kUnavailable,
                                           HasSubstr("worker2 died"))));
  EXPECT_FALSE(m1.DownReason(WorkerNode(0)).has_value());
  ASSERT_TRUE(rejoined.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(entry.generation, 1u);
  // A client now finds the job as it is: rank 2 dead.
  auto client = Backend();
  ASSERT_OK_AND_ASSIGN(
      ClientRegistration reg,
      client->RegisterClient("late client", std::string(32, 'c'), kWait));
  Membership mc;
  client->Follow(&mc, {});
  EXPECT_TRUE(mc.DownReason(WorkerNode(2)).has_value());
  EXPECT_FALSE(mc.DownReason(WorkerNode(1)).has_value());
  EXPECT_EQ(reg.directory.at(1).generation, 1u);
}

TEST_F(EtcdBackendTest, LeaveIsPublishedAsADeparture) {
  auto backends = JoinAll(2);
  Membership m0, m1;
  DownLog log0(&m0);
  bool fenced = false;
  backends[0]->Follow(&m0, {});
  backends[1]->Follow(
      &m1, {.on_fenced = [&](const absl::Status&) { fenced = true; }});
  ASSERT_OK(backends[1]->Leave(kWait));
  std::optional<absl::Status> why = log0.WaitFor(WorkerNode(1));
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, StatusIs(absl::StatusCode::kUnavailable,
                             HasSubstr("worker1 left the job")));
  EXPECT_FALSE(fenced);
}

TEST_F(EtcdBackendTest, BarrierWaitsForEveryLiveWorker) {
  auto backends = JoinAll(2);
  EXPECT_THAT(backends[0]->Barrier("alone", absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("ranks 1 did not arrive")));
  absl::Status b1;
  std::thread t([&] { b1 = backends[1]->Barrier("both", kWait); });
  EXPECT_OK(backends[0]->Barrier("both", kWait));
  t.join();
  EXPECT_OK(b1);
}

TEST_F(EtcdBackendTest, ClientsFindWorkersAndTheirDeparturesArePublished) {
  auto backends = JoinAll(2);
  Membership m0;
  DownLog log0(&m0);
  backends[0]->Follow(&m0, {});
  auto client = Backend();
  ASSERT_OK_AND_ASSIGN(
      ClientRegistration reg,
      client->RegisterClient("test client", std::string(32, 'c'), kWait));
  EXPECT_GE(reg.node, kEtcdClientBase);
  EXPECT_FALSE(reg.read_only);
  ASSERT_EQ(reg.directory.world_size(), 2);
  EXPECT_EQ(reg.directory.at(1).address, "127.0.0.1:4001");
  Membership mc;
  client->Follow(&mc, {});
  ASSERT_OK(client->Leave(kWait));
  std::optional<absl::Status> why = log0.WaitFor(reg.node);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, StatusIs(absl::StatusCode::kUnavailable,
                             HasSubstr("left the job")));
}

TEST_F(EtcdBackendTest, UnreachableEtcdIsNamed) {
  EtcdBackendOptions options;
  const std::string endpoint =
      absl::StrCat("127.0.0.1:", ::ferry::testing::UnusedPort());
  options.etcd.endpoints = {endpoint};
  options.etcd.connect_timeout = absl::Milliseconds(500);
  options.job = job_;
  EXPECT_THAT(EtcdBackend::Connect(options).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(endpoint)));
}

}  // namespace
}  // namespace ferry
