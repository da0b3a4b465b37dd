// EtcdClient against real etcd processes (tests/testing/etcd_cluster.h):
// every RPC the client declares, transactions racing, leases kept and lost,
// watches resuming across a member restart, failover in a 3-member
// cluster, unreachable endpoints, user/password auth and TLS.
//
// etcd's own clock cannot be injected, so the lease tests wait real time
// (a few TTLs of 2 s). Timings are printed, never asserted.
#include "rpc/membership/etcd/etcd_client.h"

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::EtcdCluster;
using ::ferry::testing::EtcdClusterOptions;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Bound on any single wait for a result in these tests.
constexpr absl::Duration kWait = absl::Seconds(15);
// etcd's smallest lease with its default election timeout (1 s) is 2 s.
constexpr absl::Duration kTtl = absl::Seconds(2);

void PrintTiming(const std::string& what, absl::Duration d) {
  std::cout << "[timing] " << what << ": " << absl::FormatDuration(d)
            << std::endl;
}

EtcdOptions OptionsFor(const EtcdCluster& etcd) {
  EtcdOptions options;
  options.endpoints = etcd.endpoint_list();
  return options;
}

template <typename T>
absl::StatusOr<T> Await(const Future<T>& f) {
  return f.Wait(kWait);
}

// Events a watch delivered, in arrival order.
class EventLog {
 public:
  void Add(std::vector<EtcdEvent> events) {
    absl::MutexLock lock(&mu_);
    for (EtcdEvent& e : events) events_.push_back(std::move(e));
  }
  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    end_ = status;
    ++ends_;
  }
  // Waits until `n` events arrived (bounded); returns them all.
  std::vector<EtcdEvent> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return events_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return events_;
  }
  // Waits for on_end (bounded); its status, or OK if it never came.
  absl::Status WaitEnd() {
    absl::MutexLock lock(&mu_);
    auto ended = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ends_ > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&ended), kWait);
    return end_;
  }
  int ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }
  EtcdWatchCallbacks Callbacks() {
    return {
        .on_events = [this](std::vector<EtcdEvent> e) { Add(std::move(e)); },
        .on_end = [this](const absl::Status& s) { End(s); }};
  }

 private:
  absl::Mutex mu_;
  std::vector<EtcdEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  int ends_ ABSL_GUARDED_BY(mu_) = 0;
};

// Lease losses reported, with when the first came.
class LossLog {
 public:
  EtcdLeaseLostCallback Callback() {
    return [this](const absl::Status& why) {
      absl::MutexLock lock(&mu_);
      if (count_++ == 0) {
        first_ = why;
        at_ = absl::Now();
      }
    };
  }
  absl::Status WaitFirst() {
    absl::MutexLock lock(&mu_);
    auto lost = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&lost), kWait);
    return first_;
  }
  int count() {
    absl::MutexLock lock(&mu_);
    return count_;
  }
  absl::Time at() {
    absl::MutexLock lock(&mu_);
    return at_;
  }

 private:
  absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  absl::Time at_ ABSL_GUARDED_BY(mu_);
};

std::vector<std::string> Keys(const std::vector<EtcdKeyValue>& kvs) {
  std::vector<std::string> keys;
  for (const EtcdKeyValue& kv : kvs) keys.push_back(kv.key);
  return keys;
}

std::vector<std::string> Describe(const std::vector<EtcdEvent>& events) {
  std::vector<std::string> out;
  for (const EtcdEvent& e : events) {
    out.push_back(absl::StrCat(
        e.type == EtcdEvent::Type::kPut ? "put " : "delete ", e.kv.key,
        e.type == EtcdEvent::Type::kPut ? "=" + e.kv.value : ""));
  }
  return out;
}

// Most tests share one single-member cluster; each uses its own prefix.
class EtcdClientTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { shared_.reset(); }

  void SetUp() override {
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    if (shared_ == nullptr) {
      auto started = EtcdCluster::Start();
      ASSERT_TRUE(started.ok()) << started.status();
      shared_ = *std::move(started);
    }
    auto client = EtcdClient::Connect(OptionsFor(*shared_));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    prefix_ = absl::StrCat(
        "/", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
        "/");
  }

  static std::unique_ptr<EtcdCluster> shared_;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;
};

std::unique_ptr<EtcdCluster> EtcdClientTest::shared_;

// ---- KV ----

TEST_F(EtcdClientTest, PutGetDeleteRoundTrip) {
  ASSERT_OK_AND_ASSIGN(int64_t r1, Await(client_->Put(prefix_ + "a", "1")));
  ASSERT_OK_AND_ASSIGN(int64_t r2, Await(client_->Put(prefix_ + "b", "2")));
  ASSERT_OK(Await(client_->Put(prefix_ + "c/d", "3")));
  ASSERT_OK(Await(client_->Put(prefix_.substr(0, prefix_.size() - 1) + "X",
                               "outside the prefix")));
  EXPECT_LT(r1, r2);

  ASSERT_OK_AND_ASSIGN(EtcdRange one, Await(client_->Get(prefix_ + "a")));
  ASSERT_THAT(one.kvs, SizeIs(1));
  EXPECT_EQ(one.kvs[0].value, "1");
  EXPECT_EQ(one.kvs[0].create_revision, r1);
  EXPECT_EQ(one.kvs[0].mod_revision, r1);
  EXPECT_EQ(one.kvs[0].version, 1);
  EXPECT_EQ(one.kvs[0].lease, 0);
  EXPECT_GE(one.revision, r2);

  ASSERT_OK_AND_ASSIGN(EtcdRange all, Await(client_->GetPrefix(prefix_)));
  EXPECT_THAT(Keys(all.kvs),
              ElementsAre(prefix_ + "a", prefix_ + "b", prefix_ + "c/d"));

  ASSERT_OK_AND_ASSIGN(EtcdRange missing, Await(client_->Get(prefix_ + "z")));
  EXPECT_THAT(missing.kvs, IsEmpty());

  ASSERT_OK_AND_ASSIGN(int64_t deleted, Await(client_->Delete(prefix_ + "a")));
  EXPECT_EQ(deleted, 1);
  ASSERT_OK_AND_ASSIGN(deleted, Await(client_->DeletePrefix(prefix_)));
  EXPECT_EQ(deleted, 2);
  ASSERT_OK_AND_ASSIGN(all, Await(client_->GetPrefix(prefix_)));
  EXPECT_THAT(all.kvs, IsEmpty());
}

TEST_F(EtcdClientTest, StatusNamesTheMemberAndItsLeader) {
  ASSERT_OK_AND_ASSIGN(EtcdMemberStatus status, Await(client_->Status()));
  EXPECT_EQ(status.endpoint, shared_->endpoint(0));
  EXPECT_THAT(status.version, HasSubstr("3."));
  EXPECT_NE(status.member_id, 0u);
  EXPECT_EQ(status.leader, status.member_id);  // One member: it leads.
  EXPECT_EQ(client_->endpoint(), shared_->endpoint(0));
}

// ---- Transactions ----

TEST_F(EtcdClientTest, TxnTakesAKeyOnlyIfAbsent) {
  const std::string rank = prefix_ + "rank/0";
  EtcdTxn take;
  take.compares = {EtcdCompare::Absent(rank)};
  take.success = {EtcdOp::Put(rank, "worker-a")};
  take.failure = {EtcdOp::Get(rank)};
  ASSERT_OK_AND_ASSIGN(EtcdTxnResult first, Await(client_->Txn(take)));
  EXPECT_TRUE(first.succeeded);
  ASSERT_THAT(first.results, SizeIs(1));

  take.success = {EtcdOp::Put(rank, "worker-b")};
  ASSERT_OK_AND_ASSIGN(EtcdTxnResult second, Await(client_->Txn(take)));
  EXPECT_FALSE(second.succeeded);
  ASSERT_THAT(second.results, SizeIs(1));
  ASSERT_THAT(second.results[0].kvs, SizeIs(1));
  EXPECT_EQ(second.results[0].kvs[0].value, "worker-a");
}

TEST_F(EtcdClientTest, TxnComparesEveryTarget) {
  const std::string key = prefix_ + "k";
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client_->GrantLease(kTtl)));
  ASSERT_OK_AND_ASSIGN(int64_t created, Await(client_->Put(key, "v1")));
  ASSERT_OK_AND_ASSIGN(int64_t modified,
                       Await(client_->Put(key, "v2", lease.id)));
  using R = EtcdCompare::Result;
  struct Case {
    EtcdCompare compare;
    bool holds;
  };
  const std::vector<Case> cases = {
      {EtcdCompare::VersionIs(key, R::kEqual, 2), true},
      {EtcdCompare::VersionIs(key, R::kGreater, 2), false},
      {EtcdCompare::CreateRevisionIs(key, R::kEqual, created), true},
      {EtcdCompare::ModRevisionIs(key, R::kLess, modified), false},
      {EtcdCompare::ModRevisionIs(key, R::kEqual, modified), true},
      {EtcdCompare::ValueIs(key, R::kEqual, "v2"), true},
      {EtcdCompare::ValueIs(key, R::kNotEqual, "v2"), false},
      {EtcdCompare::LeaseIs(key, R::kEqual, lease.id), true},
      {EtcdCompare::Absent(key), false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EtcdTxn txn;
    txn.compares = {cases[i].compare};
    txn.success = {EtcdOp::GetPrefix(prefix_)};
    txn.failure = {EtcdOp::Delete(prefix_ + "nothing")};
    ASSERT_OK_AND_ASSIGN(EtcdTxnResult r, Await(client_->Txn(txn)));
    EXPECT_EQ(r.succeeded, cases[i].holds) << "case " << i;
    ASSERT_THAT(r.results, SizeIs(1));
    if (r.succeeded) {
      EXPECT_THAT(r.results[0].kvs, SizeIs(1)) << "case " << i;
    }
  }
  // A transaction that deletes reports how many keys went.
  EtcdTxn drop;
  drop.success = {EtcdOp::DeletePrefix(prefix_)};
  ASSERT_OK_AND_ASSIGN(EtcdTxnResult dropped, Await(client_->Txn(drop)));
  ASSERT_THAT(dropped.results, SizeIs(1));
  EXPECT_EQ(dropped.results[0].deleted, 1);
  ASSERT_OK(Await(client_->RevokeLease(lease.id)));
}

TEST_F(EtcdClientTest, TxnWithAnEmptyKeyIsRejectedLocally) {
  EtcdTxn txn;
  txn.compares = {EtcdCompare::Absent(prefix_ + "a")};
  txn.success = {EtcdOp::Put("", "v")};
  EXPECT_THAT(Await(client_->Txn(txn)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("success[0]: empty key")));
}

TEST_F(EtcdClientTest, RacingTxnsGiveEachRankToExactlyOneClient) {
  ASSERT_OK_AND_ASSIGN(auto other, EtcdClient::Connect(OptionsFor(*shared_)));
  constexpr int kRanks = 16;
  std::vector<Future<EtcdTxnResult>> a, b;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string key = absl::StrCat(prefix_, "rank/", rank);
    for (auto [client, name, out] : {std::make_tuple(client_.get(), "a", &a),
                                     std::make_tuple(other.get(), "b", &b)}) {
      EtcdTxn take;
      take.compares = {EtcdCompare::Absent(key)};
      take.success = {EtcdOp::Put(key, name)};
      out->push_back(client->Txn(take));
    }
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_OK_AND_ASSIGN(EtcdTxnResult ra, Await(a[rank]));
    ASSERT_OK_AND_ASSIGN(EtcdTxnResult rb, Await(b[rank]));
    EXPECT_NE(ra.succeeded, rb.succeeded) << "rank " << rank;
    ASSERT_OK_AND_ASSIGN(
        EtcdRange owner,
        Await(client_->Get(absl::StrCat(prefix_, "rank/", rank))));
    ASSERT_THAT(owner.kvs, SizeIs(1));
    EXPECT_EQ(owner.kvs[0].value, ra.succeeded ? "a" : "b");
  }
}

// ---- Leases ----

TEST_F(EtcdClientTest, LeaseGrantTimeToLiveRevoke) {
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client_->GrantLease(kTtl)));
  EXPECT_NE(lease.id, 0);
  EXPECT_GE(lease.ttl, kTtl);
  ASSERT_OK(Await(client_->Put(prefix_ + "mine", "x", lease.id)));
  ASSERT_OK_AND_ASSIGN(absl::Duration left,
                       Await(client_->LeaseTimeToLive(lease.id)));
  EXPECT_GT(left, absl::ZeroDuration());
  EXPECT_LE(left, lease.ttl);

  ASSERT_OK(Await(client_->RevokeLease(lease.id)));
  ASSERT_OK_AND_ASSIGN(EtcdRange gone, Await(client_->Get(prefix_ + "mine")));
  EXPECT_THAT(gone.kvs, IsEmpty());
  EXPECT_THAT(
      Await(client_->LeaseTimeToLive(lease.id)),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such lease")));
  EXPECT_THAT(Await(client_->RevokeLease(lease.id)),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(shared_->endpoint(0)),
                             HasSubstr("LeaseRevoke"))));
  EXPECT_THAT(Await(client_->Put(prefix_ + "k", "v", lease.id)),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("Put '" + prefix_ + "k'"),
                             HasSubstr("lease not found"))));
}

TEST_F(EtcdClientTest, KeepAliveKeepsTheKeyPastThreeTtls) {
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client_->GrantLease(kTtl)));
  ASSERT_OK(Await(client_->Put(prefix_ + "alive", "x", lease.id)));
  LossLog losses;
  auto keep = client_->KeepAlive(lease, losses.Callback());
  // etcd's clock runs for real: only real time can show the lease outlives
  // its TTL. Waits for the renewals themselves: once one sent three TTLs
  // after the grant was answered, the key has outlived three TTLs.
  ASSERT_TRUE(AwaitTrue(
      [&] { return keep->expires_at() > lease.granted_at + 4 * lease.ttl; },
      10 * lease.ttl, /*every=*/absl::Milliseconds(10)))
      << "the lease was not renewed past three TTLs";
  ASSERT_OK_AND_ASSIGN(EtcdRange still, Await(client_->Get(prefix_ + "alive")));
  EXPECT_THAT(still.kvs, SizeIs(1));
  EXPECT_EQ(losses.count(), 0);
  EXPECT_GT(keep->expires_at(), absl::Now());
  keep->Stop();
  ASSERT_OK(Await(client_->RevokeLease(lease.id)));
  EXPECT_EQ(losses.count(), 0);  // Stopped first: no loss reported.
}

TEST_F(EtcdClientTest, RevokedLeaseIsReportedLostExactlyOnce) {
  ASSERT_OK_AND_ASSIGN(auto other, EtcdClient::Connect(OptionsFor(*shared_)));
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client_->GrantLease(kTtl)));
  LossLog losses;
  auto keep = client_->KeepAlive(lease, losses.Callback());
  const absl::Time revoked = absl::Now();
  ASSERT_OK(Await(other->RevokeLease(lease.id)));
  EXPECT_THAT(losses.WaitFirst(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(absl::StrCat("lease ", lease.id)),
                             HasSubstr("expired or revoked"))));
  PrintTiming("revoked lease reported lost after", losses.at() - revoked);
  EXPECT_TRUE(keep->lost());
  keep->Stop();  // After Stop no callback can come: the count is final.
  EXPECT_EQ(losses.count(), 1);
}

// ---- Watch ----

TEST_F(EtcdClientTest, WatchDeliversEveryChangeInOrder) {
  ASSERT_OK_AND_ASSIGN(int64_t first, Await(client_->Put(prefix_ + "a", "1")));
  ASSERT_OK(Await(client_->Put(prefix_ + "b", "2")));
  EventLog log;
  // From a past revision: the history comes first, then live changes.
  auto watch = client_->WatchPrefix(prefix_, first, log.Callbacks());
  ASSERT_OK(Await(client_->Put(prefix_ + "a", "3")));
  ASSERT_OK(Await(client_->Put(prefix_.substr(0, prefix_.size() - 1) + "X",
                               "not watched")));
  ASSERT_OK(Await(client_->Delete(prefix_ + "b")));
  EtcdTxn txn;  // Two changes in one revision.
  txn.success = {EtcdOp::Put(prefix_ + "c", "4"),
                 EtcdOp::Delete(prefix_ + "a")};
  ASSERT_OK(Await(client_->Txn(txn)));
  std::vector<EtcdEvent> events = log.WaitFor(6);
  EXPECT_THAT(Describe(events),
              ElementsAre("put " + prefix_ + "a=1", "put " + prefix_ + "b=2",
                          "put " + prefix_ + "a=3", "delete " + prefix_ + "b",
                          "put " + prefix_ + "c=4", "delete " + prefix_ + "a"));
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_LE(events[i - 1].kv.mod_revision, events[i].kv.mod_revision);
  }
  EXPECT_EQ(watch->next_revision(), events.back().kv.mod_revision + 1);
  watch->Stop();
  EXPECT_EQ(log.ends(), 0);
}

TEST_F(EtcdClientTest, WatchFromACompactedRevisionEndsWithOutOfRange) {
  ASSERT_OK_AND_ASSIGN(int64_t first, Await(client_->Put(prefix_ + "a", "1")));
  ASSERT_OK_AND_ASSIGN(int64_t last, Await(client_->Put(prefix_ + "a", "2")));
  ASSERT_OK(Await(client_->Compact(last)));
  EXPECT_THAT(Await(client_->Get(prefix_ + "a")),
              StatusIs(absl::StatusCode::kOk));
  EventLog log;
  auto watch = client_->WatchPrefix(prefix_, first, log.Callbacks());
  EXPECT_THAT(log.WaitEnd(),
              StatusIs(absl::StatusCode::kOutOfRange,
                       AllOf(HasSubstr(absl::StrCat("revision ", last)),
                             HasSubstr("compacted"))));
  watch->Stop();
  EXPECT_THAT(log.WaitFor(0), IsEmpty());
  EXPECT_EQ(log.ends(), 1);
}

// ---- Lifecycle ----

TEST_F(EtcdClientTest, StopEndsCallsStreamsAndLaterCalls) {
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client_->GrantLease(kTtl)));
  LossLog losses;
  EventLog log;
  auto keep = client_->KeepAlive(lease, losses.Callback());
  auto watch = client_->WatchPrefix(prefix_, 0, log.Callbacks());
  client_->Stop();
  EXPECT_THAT(Await(client_->Put(prefix_ + "late", "x")),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("stopping")));
  // Handles outlive the client harmlessly.
  client_.reset();
  keep->Stop();
  watch->Stop();
  EXPECT_EQ(losses.count(), 0);
  EXPECT_EQ(log.ends(), 0);
}

TEST(EtcdClientConnectTest, UnreachableEndpointsFailWithinTheTimeout) {
  const std::string a = absl::StrCat("127.0.0.1:", testing::UnusedPort());
  const std::string b = absl::StrCat("127.0.0.1:", testing::UnusedPort());
  EtcdOptions options;
  options.endpoints = {a, b};
  options.connect_timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  EXPECT_THAT(EtcdClient::Connect(options),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("no healthy etcd endpoint"),
                             HasSubstr("etcd " + a + ": Status"),
                             HasSubstr("etcd " + b + ": Status"))));
  PrintTiming("Connect to 2 dead endpoints gave up after", absl::Now() - start);
}

TEST(EtcdClientConnectTest, BadOptionsAreInvalidArgument) {
  EtcdOptions options;
  EXPECT_THAT(EtcdClient::Connect(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no etcd endpoints")));
  options.endpoints = {"127.0.0.1"};
  EXPECT_THAT(
      EtcdClient::Connect(options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'127.0.0.1'")));
  options.endpoints = {"127.0.0.1:1"};
  options.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_THAT(EtcdClient::Connect(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/nonexistent/ca.pem")));
}

// ---- One member going away and coming back ----

class EtcdRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    auto started = EtcdCluster::Start();
    ASSERT_TRUE(started.ok()) << started.status();
    etcd_ = *std::move(started);
    auto client = EtcdClient::Connect(OptionsFor(*etcd_));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdRestartTest, WatchResumesAfterTheServerRestarts) {
  ASSERT_OK_AND_ASSIGN(EtcdRange start, Await(client_->GetPrefix("/job/")));
  EventLog log;
  auto watch =
      client_->WatchPrefix("/job/", start.revision + 1, log.Callbacks());
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(Await(client_->Put(absl::StrCat("/job/", i), "before")));
  }
  ASSERT_THAT(log.WaitFor(5), SizeIs(5));
  ASSERT_OK(etcd_->Stop(0));
  ASSERT_OK(etcd_->Restart(0));
  for (int i = 5; i < 10; ++i) {
    ASSERT_OK(Await(client_->Put(absl::StrCat("/job/", i), "after")));
  }
  std::vector<EtcdEvent> events = log.WaitFor(10);
  ASSERT_THAT(events, SizeIs(10));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(events[i].kv.key, absl::StrCat("/job/", i));
    if (i > 0) {
      EXPECT_LT(events[i - 1].kv.mod_revision, events[i].kv.mod_revision);
    }
  }
  EXPECT_GE(watch->streams_opened(), 2);
  // Nothing more arrives (no duplicates): one more put is the next event.
  ASSERT_OK(Await(client_->Put("/job/last", "x")));
  events = log.WaitFor(11);
  ASSERT_THAT(events, SizeIs(11));
  EXPECT_EQ(events[10].kv.key, "/job/last");
  EXPECT_EQ(log.ends(), 0);
}

TEST_F(EtcdRestartTest, LeaseIsReportedLostWhenEtcdStaysAwayPastItsTtl) {
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client_->GrantLease(kTtl)));
  LossLog losses;
  auto keep = client_->KeepAlive(lease, losses.Callback());
  const absl::Time killed = absl::Now();
  ASSERT_OK(etcd_->Kill(0));
  EXPECT_THAT(
      losses.WaitFirst(),
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               AllOf(HasSubstr(absl::StrCat("lease ", lease.id)),
                     HasSubstr("not renewed"), HasSubstr(etcd_->endpoint(0)))));
  PrintTiming("lease (TTL 2 s) reported lost after etcd was killed",
              losses.at() - killed);
  EXPECT_LE(keep->expires_at(), absl::Now());
  keep->Stop();
  EXPECT_EQ(losses.count(), 1);
}

TEST_F(EtcdRestartTest, CallsFailWithUnavailableNamingTheEndpointWhileDown) {
  EtcdOptions options = OptionsFor(*etcd_);
  options.call_timeout = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(client_, EtcdClient::Connect(options));
  ASSERT_OK(etcd_->Kill(0));
  EXPECT_THAT(Await(client_->Get("/k")),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("etcd " + etcd_->endpoint(0)),
                             HasSubstr("Range '/k'"))));
  ASSERT_OK(etcd_->Restart(0));
  EXPECT_OK(Await(client_->Put("/k", "back")));
}

// ---- Three members: failover ----

// The cluster's endpoints with member `first` first: the client starts on
// it.
EtcdOptions StartingOn(const EtcdCluster& etcd, int first) {
  EtcdOptions options;
  options.endpoints = {etcd.endpoint(first)};
  for (int i = 0; i < etcd.size(); ++i) {
    if (i != first) options.endpoints.push_back(etcd.endpoint(i));
  }
  return options;
}

// Retries `put` until it succeeds or kWait passed: after a leader dies, a
// write can be lost with it and time out, which a caller retries.
absl::Status PutUntilDone(EtcdClient& client, const std::string& key,
                          const std::string& value) {
  const absl::Time deadline = absl::Now() + kWait;
  absl::Status last;
  do {
    last = Await(client.Put(key, value)).status();
  } while (!last.ok() && absl::Now() < deadline);
  return last;
}

class EtcdFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    auto started = EtcdCluster::Start({.members = 3});
    ASSERT_TRUE(started.ok()) << started.status();
    etcd_ = *std::move(started);
    auto leader = etcd_->LeaderIndex();
    ASSERT_TRUE(leader.ok()) << leader.status();
    leader_ = *leader;
  }

  // Connects starting on member `first`, then keeps a lease (with a key)
  // and watches /job/.
  void Follow(int first, absl::Duration ttl) {
    auto client = EtcdClient::Connect(StartingOn(*etcd_, first));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    ASSERT_EQ(client_->endpoint(), etcd_->endpoint(first));
    ASSERT_OK_AND_ASSIGN(lease_, Await(client_->GrantLease(ttl)));
    ASSERT_OK(Await(client_->Put("/job/worker0", "addr0", lease_.id)));
    keep_ = client_->KeepAlive(lease_, losses_.Callback());
    ASSERT_OK_AND_ASSIGN(EtcdRange start, Await(client_->GetPrefix("/job/")));
    watch_ =
        client_->WatchPrefix("/job/", start.revision + 1, log_.Callbacks());
  }

  // Kills the client's member; KV, the lease and the watch go on.
  void KillAndCarryOn(const std::string& label) {
    const std::string before = client_->endpoint();
    const absl::Time killed = absl::Now();
    ASSERT_OK(etcd_->Kill(etcd_->IndexOf(before)));
    ASSERT_OK(PutUntilDone(*client_, "/job/worker1", "addr1"));
    PrintTiming(label + ": first write after the kill took",
                absl::Now() - killed);
    EXPECT_NE(client_->endpoint(), before);
    EXPECT_THAT(log_.WaitFor(1), SizeIs(1));
    PrintTiming(label + ": watch event after the kill took",
                absl::Now() - killed);
    // Renewals go on through the survivors: the lease outlives a whole TTL
    // after the kill (etcd's clock is real; so is this wait, for a renewal
    // sent a TTL after the kill to be answered).
    ASSERT_TRUE(
        AwaitTrue([&] { return keep_->expires_at() > killed + 2 * lease_.ttl; },
                  10 * lease_.ttl, /*every=*/absl::Milliseconds(10)))
        << "no renewal a TTL after the kill";
    ASSERT_OK_AND_ASSIGN(absl::Duration left,
                         Await(client_->LeaseTimeToLive(lease_.id)));
    EXPECT_GT(left, absl::ZeroDuration());
    ASSERT_OK_AND_ASSIGN(EtcdRange alive, Await(client_->Get("/job/worker0")));
    EXPECT_THAT(alive.kvs, SizeIs(1));
    EXPECT_EQ(losses_.count(), 0) << losses_.WaitFirst();
    ASSERT_OK(Await(client_->Delete("/job/worker1")));
    EXPECT_THAT(Describe(log_.WaitFor(2)),
                ElementsAre("put /job/worker1=addr1", "delete /job/worker1"));
    EXPECT_EQ(log_.ends(), 0);
  }

  std::unique_ptr<EtcdCluster> etcd_;
  int leader_ = -1;
  std::unique_ptr<EtcdClient> client_;
  EtcdLease lease_;
  LossLog losses_;
  EventLog log_;
  std::unique_ptr<EtcdKeepAlive> keep_;
  std::unique_ptr<EtcdWatch> watch_;
};

TEST_F(EtcdFailoverTest, KillingTheClientsFollowerMovesItToAnotherMember) {
  Follow((leader_ + 1) % etcd_->size(), kTtl);
  KillAndCarryOn("follower killed");
}

// Writes in flight die with the leader until the others elect a new one;
// the lease (TTL 5 s) rides out the election.
TEST_F(EtcdFailoverTest, KillingTheClientsLeaderMovesItToAnotherMember) {
  Follow(leader_, absl::Seconds(5));
  KillAndCarryOn("leader killed");
}

// ---- Authentication ----

// Raw Authenticate + Range with a token, to see what etcd itself does.
grpc::Status RangeWithToken(const std::string& endpoint,
                            const std::string& token) {
  auto channel =
      grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  context.AddMetadata("token", token);
  etcdserverpb::RangeRequest request;
  request.set_key("/job/x");
  etcdserverpb::RangeResponse response;
  return etcdserverpb::KV::NewStub(channel)->Range(&context, request,
                                                   &response);
}

std::string RawToken(const std::string& endpoint, const std::string& user,
                     const std::string& password) {
  auto channel =
      grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  etcdserverpb::AuthenticateRequest request;
  request.set_name(user);
  request.set_password(password);
  etcdserverpb::AuthenticateResponse response;
  etcdserverpb::Auth::NewStub(channel)->Authenticate(&context, request,
                                                     &response);
  return response.token();
}

TEST(EtcdAuthTest, UserPasswordAndTokenRenewal) {
  if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start());
  {
    ASSERT_OK_AND_ASSIGN(auto admin, EtcdClient::Connect(OptionsFor(*etcd)));
    ASSERT_OK(Await(admin->AddUser("root", "rootpw")));
    ASSERT_OK(Await(admin->GrantRole("root", "root")));
    ASSERT_OK(Await(admin->AddUser("ferry", "secret")));
    ASSERT_OK(Await(admin->AddRole("ferry")));
    ASSERT_OK(Await(admin->GrantPrefix("ferry", "/job/")));
    ASSERT_OK(Await(admin->GrantRole("ferry", "ferry")));
    ASSERT_OK(Await(admin->EnableAuth()));
    // Without credentials nothing is allowed any more.
    EXPECT_THAT(Await(admin->Get("/job/x")),
                StatusIs(absl::StatusCode::kUnauthenticated,
                         HasSubstr(etcd->endpoint(0))));
  }
  EtcdOptions options = OptionsFor(*etcd);
  options.user = "ferry";
  options.password = "wrong";
  EXPECT_THAT(EtcdClient::Connect(options),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       AllOf(HasSubstr("user 'ferry'"),
                             HasSubstr("authentication failed"))));

  options.password = "secret";
  ASSERT_OK_AND_ASSIGN(auto client, EtcdClient::Connect(options));
  ASSERT_OK(Await(client->Put("/job/x", "1")));
  EXPECT_THAT(Await(client->Put("/other/x", "1")),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("Put '/other/x'")));
  EventLog denied;
  auto forbidden = client->WatchPrefix("/other/", 0, denied.Callbacks());
  EXPECT_THAT(denied.WaitEnd(), StatusIs(absl::StatusCode::kPermissionDenied,
                                         HasSubstr("permission denied")));
  EventLog log;
  auto watch = client->WatchPrefix("/job/", 0, log.Callbacks());
  ASSERT_OK_AND_ASSIGN(EtcdLease lease, Await(client->GrantLease(kTtl)));
  LossLog losses;
  auto keep = client->KeepAlive(lease, losses.Callback());

  // Turning auth off and on again voids every token etcd handed out; the
  // client's next call gets "invalid auth token", renews and goes on.
  EtcdOptions root = OptionsFor(*etcd);
  root.user = "root";
  root.password = "rootpw";
  ASSERT_OK_AND_ASSIGN(auto admin, EtcdClient::Connect(root));
  const std::string old_token = RawToken(etcd->endpoint(0), "ferry", "secret");
  ASSERT_OK(Await(admin->DisableAuth()));
  ASSERT_OK(Await(admin->EnableAuth()));
  grpc::Status stale = RangeWithToken(etcd->endpoint(0), old_token);
  EXPECT_THAT(stale.error_message(), HasSubstr("invalid auth token"));

  ASSERT_OK(Await(client->Put("/job/y", "2")));
  ASSERT_OK_AND_ASSIGN(EtcdRange got, Await(client->GetPrefix("/job/")));
  EXPECT_THAT(Keys(got.kvs), ElementsAre("/job/x", "/job/y"));
  EXPECT_THAT(Describe(log.WaitFor(1)), ElementsAre("put /job/y=2"));
  ASSERT_OK_AND_ASSIGN(absl::Duration left,
                       Await(client->LeaseTimeToLive(lease.id)));
  EXPECT_GT(left, absl::ZeroDuration());
  EXPECT_EQ(losses.count(), 0);
}

// ---- TLS ----

TEST(EtcdTlsTest, MutualTls) {
  if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start({.tls = true}));
  EtcdOptions options = OptionsFor(*etcd);
  options.tls_ca_file = etcd->tls_ca_file();
  options.tls_cert_file = etcd->tls_cert_file();
  options.tls_key_file = etcd->tls_key_file();
  ASSERT_OK_AND_ASSIGN(auto client, EtcdClient::Connect(options));
  ASSERT_OK(Await(client->Put("/tls/x", "1")));
  ASSERT_OK_AND_ASSIGN(EtcdRange got, Await(client->Get("/tls/x")));
  ASSERT_THAT(got.kvs, SizeIs(1));
  EXPECT_EQ(got.kvs[0].value, "1");

  // Plaintext, or TLS without a client certificate, does not get in.
  EtcdOptions plain = OptionsFor(*etcd);
  plain.connect_timeout = absl::Seconds(1);
  EXPECT_THAT(
      EtcdClient::Connect(plain),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr(etcd->endpoint(0))));
  EtcdOptions anonymous = plain;
  anonymous.tls_ca_file = etcd->tls_ca_file();
  EXPECT_THAT(
      EtcdClient::Connect(anonymous),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr(etcd->endpoint(0))));
}

}  // namespace
}  // namespace ferry
