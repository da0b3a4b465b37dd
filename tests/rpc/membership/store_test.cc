// The job's key-value store (torch's Store): the same tests over the
// embedded master's StoreService and over etcd (a real single-member etcd
// started by the test); then the service's bounds and deadlines, on
// hand-stepped timers, and a full worker serving it on rank 0.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "collectives/op/collective_context.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/store.grpc.pb.h"
#include "rpc/auth/security.h"
#include "rpc/membership/store_budget.h"
#include "rpc/membership/store_client.h"
#include "rpc/membership/store_service.h"
#include "tests/testing/await.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::EtcdCluster;
using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

// An OK StatusOr holding `v`.
MATCHER_P(Holds, v, "") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  *result_listener << "holds " << ::testing::PrintToString(*arg);
  return *arg == v;
}

// A StoreService on 127.0.0.1:0 of its own.
class StoreServer {
 public:
  StoreServer(StoreLimits limits, Timers* timers) : service_(limits, timers) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  ~StoreServer() {
    service_.Stop();
    server_->Shutdown();
  }
  const std::string& address() const { return address_; }
  StoreService& service() { return service_; }

 private:
  StoreService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// ---- The same behaviour on both ----

enum class Backend { kMaster, kEtcd };

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  static void TearDownTestSuite() {
    master_.reset();
    etcd_.reset();
  }

  void SetUp() override {
    if (GetParam() == Backend::kMaster) {
      if (master_ == nullptr) {
        master_ = std::make_unique<StoreServer>(StoreLimits{}, Timers());
      }
      auto s = ConnectMasterStore(master_->address(), Security::Insecure());
      ASSERT_OK(s);
      store_ = *std::move(s);
    } else {
      if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
      if (etcd_ == nullptr) {
        auto started = EtcdCluster::Start();
        ASSERT_OK(started);
        etcd_ = *std::move(started);
      }
      EtcdOptions o;
      o.endpoints = etcd_->endpoint_list();
      auto s = ConnectEtcdStore(o, "storetest");
      ASSERT_OK(s);
      store_ = *std::move(s);
    }
    // Each test's keys are its own.
    prefix_ = absl::StrCat(
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
  }

  std::string K(const std::string& key) { return prefix_ + key; }

  static ThreadTimers* Timers() {
    static auto* timers = new ThreadTimers();  // Outlives every server.
    return timers;
  }
  static inline std::unique_ptr<StoreServer> master_;
  static inline std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<KeyValueStore> store_;
  std::string prefix_;
};

TEST_P(StoreTest, SetGetDelete) {
  ASSERT_OK(store_->Set(K("a"), std::string("v\0w", 3)));
  EXPECT_THAT(store_->Get(K("a"), absl::Seconds(5)),
              Holds(std::string("v\0w", 3)));
  EXPECT_THAT(store_->Check({K("a"), K("b")}), Holds(false));
  ASSERT_OK(store_->Set(K("b"), ""));
  EXPECT_THAT(store_->Check({K("a"), K("b")}), Holds(true));
  EXPECT_THAT(store_->Delete(K("a")), Holds(true));
  EXPECT_THAT(store_->Delete(K("a")), Holds(false));
  EXPECT_THAT(store_->Check({K("a")}), Holds(false));
}

TEST_P(StoreTest, AddCountsFromZero) {
  EXPECT_THAT(store_->Add(K("n"), 3), Holds(int64_t{3}));
  EXPECT_THAT(store_->Add(K("n"), -5), Holds(int64_t{-2}));
  EXPECT_THAT(store_->Get(K("n"), absl::Seconds(5)), Holds(std::string("-2")));
  ASSERT_OK(store_->Set(K("text"), "x"));
  EXPECT_THAT(store_->Add(K("text"), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not an integer")));
  ASSERT_OK(store_->Set(K("big"), "9223372036854775807"));
  EXPECT_THAT(
      store_->Add(K("big"), 1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflows")));
}

TEST_P(StoreTest, CompareSetAsTorchHasIt) {
  // Unset and expecting nothing: set.
  EXPECT_THAT(store_->CompareSet(K("c"), "", "one"), Holds(std::string("one")));
  // Expecting something else: the value stays and is returned.
  EXPECT_THAT(store_->CompareSet(K("c"), "zero", "two"),
              Holds(std::string("one")));
  EXPECT_THAT(store_->CompareSet(K("c"), "one", "two"),
              Holds(std::string("two")));
}

TEST_P(StoreTest, AGetWaitsForItsKey) {
  absl::StatusOr<std::string> got;
  std::thread t([&] { got = store_->Get(K("late"), absl::Seconds(60)); });
  // Set after the wait began or before: either way the Get returns it.
  ASSERT_OK(store_->Set(K("late"), "here"));
  t.join();
  EXPECT_THAT(got, Holds(std::string("here")));
  std::thread w([&] {
    EXPECT_OK(store_->Wait({K("w1"), K("w2")}, absl::Seconds(60)));
  });
  ASSERT_OK(store_->Set(K("w2"), "2"));
  ASSERT_OK(store_->Add(K("w1"), 1));
  w.join();
}

TEST_P(StoreTest, NumKeysCountsThem) {
  absl::StatusOr<int64_t> before = store_->NumKeys();
  ASSERT_OK(before);
  ASSERT_OK(store_->Set(K("x"), "1"));
  EXPECT_THAT(store_->NumKeys(), Holds(*before + 1));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest,
                         ::testing::Values(Backend::kMaster, Backend::kEtcd),
                         [](const ::testing::TestParamInfo<Backend>& i) {
                           return i.param == Backend::kMaster
                                      ? std::string("Master")
                                      : std::string("Etcd");
                         });

// ---- The service's bounds and deadlines ----

class StoreServiceTest : public ::testing::Test {
 protected:
  void Start(StoreLimits limits) {
    server_ = std::make_unique<StoreServer>(limits, &timers_);
    store_ = *ConnectMasterStore(server_->address(), Security::Insecure());
  }
  void TearDown() override {
    server_.reset();
    timers_.Stop();
  }
  // Waits (bounded) until `n` calls wait at the service, with their
  // deadlines' timers set (a waiter is counted a moment before its timer
  // is: stepping the clock in between left the timer due and unrun, and
  // the test hung).
  void AwaitWaits(int64_t n) {
    ASSERT_TRUE(::ferry::testing::AwaitTrue(
        [&] {
          return server_->service().num_waits() == n &&
                 (n == 0 || timers_.has_pending());
        },
        absl::Seconds(60)))
        << server_->service().num_waits() << " waits";
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<KeyValueStore> store_;
};

TEST_F(StoreServiceTest, AWaitEndsAtItsDeadlineNamingTheKey) {
  Start({});
  absl::StatusOr<std::string> got;
  absl::Notification done;
  std::thread t([&] {
    got = store_->Get("never", absl::Minutes(10));
    done.Notify();
  });
  AwaitWaits(1);
  timers_.Advance(absl::Minutes(10) - absl::Milliseconds(1));
  EXPECT_FALSE(done.HasBeenNotified());
  timers_.Advance(absl::Milliseconds(1));
  t.join();
  EXPECT_THAT(got,
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("key \"never\" not set within 600000 ms")));
  EXPECT_EQ(server_->service().num_waits(), 0);
}

TEST_F(StoreServiceTest, BoundsAreNamed) {
  StoreLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.shares.job.keys = 2;
  limits.shares.job.bytes = 30;
  limits.shares.job.waits = 1;
  Start(limits);
  EXPECT_THAT(store_->Set("", "v"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("an empty key")));
  EXPECT_THAT(store_->Set("123456789", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("over the limit of 8")));
  EXPECT_THAT(store_->Set("k", std::string(17, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a value of 17 bytes")));
  ASSERT_OK(store_->Set("a", std::string(16, 'x')));
  EXPECT_THAT(store_->Set("b", std::string(16, 'x')),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("over the limit of 30")));
  ASSERT_OK(store_->Set("b", "1"));
  EXPECT_THAT(store_->Set("c", "1"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("would hold 3 keys, over the limit of 2 "
                                 "per job")));
  // One wait at a time.
  absl::Notification done;
  std::thread t([&] {
    EXPECT_OK(store_->Wait({"z"}, absl::Hours(1)));
    done.Notify();
  });
  AwaitWaits(1);
  EXPECT_THAT(store_->Get("y", absl::Hours(1)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("would hold 2 waiting calls, over the "
                                 "limit of 1 per job")));
  ASSERT_OK(store_->Delete("b"));
  ASSERT_OK(store_->Set("z", ""));
  t.join();
}

TEST_F(StoreServiceTest, StoppingEndsTheWaits) {
  Start({});
  absl::Status status;
  std::thread t([&] { status = store_->Get("k", absl::Hours(1)).status(); });
  AwaitWaits(1);
  server_->service().Stop();
  t.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("the master is stopping")));
}

// A waiting call its caller cancels leaves the store at once (gRPC's
// cancellation reaches the service), giving its place back: issue 49's R2,
// where 4096 abandoned Gets closed the store's waits for an hour.
TEST_F(StoreServiceTest, ACancelledCallLeavesTheStore) {
  StoreLimits limits;
  limits.shares.job.waits = 1;
  Start(limits);
  std::unique_ptr<proto::Store::Stub> stub =
      proto::Store::NewStub(grpc::CreateChannel(
          server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  proto::StoreGetRequest request;
  request.set_key("never");
  request.set_wait_ms(absl::ToInt64Milliseconds(absl::Hours(1)));
  proto::StoreGetResponse response;
  absl::Notification done;
  grpc::Status status;
  stub->async()->Get(&context, &request, &response, [&](grpc::Status s) {
    status = s;
    done.Notify();
  });
  AwaitWaits(1);
  context.TryCancel();
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(::ferry::testing::AwaitTrue(
      [&] { return server_->service().num_waits() == 0; }, absl::Seconds(60)));
  EXPECT_EQ(server_->service().state().job_held(), StoreAmount{});
  // The one place is free: a wait is taken again.
  absl::StatusOr<std::string> got;
  std::thread t([&] { got = store_->Get("k", absl::Hours(1)); });
  AwaitWaits(1);
  ASSERT_OK(store_->Set("k", "v"));
  t.join();
  EXPECT_THAT(got, Holds(std::string("v")));
}

// Rank 0 of a job on the embedded master serves the store.
TEST(StoreOnAWorkerTest, TheMasterServesIt) {
  auto job = LocalJob::Start(2);
  ASSERT_OK(job);
  auto store = ConnectMasterStore((*job)->master(), Security::Insecure());
  ASSERT_OK(store);
  ASSERT_OK((*store)->Set("torch/rank0", "ready"));
  EXPECT_THAT((*store)->Get("torch/rank0", absl::Seconds(30)),
              Holds(std::string("ready")));
}

// The keys where agreements keep their decisions (elastic.h) are changed
// by the job's workers only: a caller that is none (no node credential
// here; a client's in a job with a token) is refused every change there,
// and may still read them and change any other key.
TEST(StoreOnAWorkerTest, OnlyWorkersChangeTheAgreementsKeys) {
  auto job = LocalJob::Start(2);
  ASSERT_OK(job);
  auto outsider = ConnectMasterStore((*job)->master(), Security::Insecure());
  ASSERT_OK(outsider);
  const std::string key = absl::StrCat(StoreService::kWorkersOnly, "w/t:1");
  constexpr auto kDenied = absl::StatusCode::kPermissionDenied;
  EXPECT_THAT((*outsider)->Set(key, "1:0"),
              StatusIs(kDenied, HasSubstr("only the job's workers change")));
  EXPECT_THAT((*outsider)->CompareSet(key, "", "1:0"), StatusIs(kDenied));
  EXPECT_THAT((*outsider)->Add(key, 1), StatusIs(kDenied));
  EXPECT_THAT((*outsider)->Delete(key), StatusIs(kDenied));
  ASSERT_OK((*outsider)->Set("ferry/agreed", "1"));  // Not under the prefix.
  // A worker proposes there (over its membership channel, as Agree does).
  ASSERT_OK_AND_ASSIGN(KeyValueStore * arbiter,
                       (*job)->worker(1).collectives().Arbiter());
  EXPECT_THAT(arbiter->CompareSet(key, "", "1:0,1"),
              Holds(std::string("1:0,1")));
  EXPECT_THAT((*outsider)->Get(key, absl::Seconds(30)),
              Holds(std::string("1:0,1")));
  ASSERT_OK(arbiter->Delete(key));
}

}  // namespace
}  // namespace ferry
