// The Authenticator decides on a call's headers, before its body is read:
// the job's token, gRPC's health check left open, and node credentials
// naming the caller.
#include "rpc/authenticator.h"

#include <malloc.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "rpc/base/quota.h"
#include "rpc/security.h"

namespace ferry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Echoes one message and remembers which node the call proved to be.
class EchoService final : public grpc::CallbackGenericService {
 public:
  explicit EchoService(const Authenticator* authenticator)
      : authenticator_(authenticator) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    ++handled;
    if (entered != nullptr) entered->Notify();
    node = authenticator_->NodeOf(*context);
    return new Reactor();
  }
  int handled = 0;
  std::optional<uint64_t> node;
  // Notified when a call reaches the handler, if set.
  absl::Notification* entered = nullptr;

 private:
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() { StartRead(&buffer_); }
    void OnReadDone(bool ok) override {
      if (ok) {
        StartWrite(&buffer_);
      } else {
        Finish(grpc::Status::OK);
      }
    }
    void OnWriteDone(bool) override { Finish(grpc::Status::OK); }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer buffer_;
  };
  const Authenticator* authenticator_;
};

int64_t HeapInUse() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

constexpr uint64_t kClient = uint64_t{1} << 32;  // The first client node.

class AuthenticatorTest : public ::testing::TestWithParam<bool> {
 protected:
  explicit AuthenticatorTest(AuthenticatorOptions options = {.token = "s3cret"},
                             bool joined = true)
      : authenticator_(std::make_shared<Authenticator>(std::move(options))),
        service_(authenticator_.get()) {
    // As on a worker that has read its Join answer (no waiting for it).
    if (joined) authenticator_->SetClientKey("");
  }

  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    // Both kinds of port a worker serves: loopback TCP and a unix socket.
    std::string address =
        GetParam() ? "unix-abstract:ferry-auth-test-" : "127.0.0.1:0";
    if (GetParam()) address += std::to_string(getpid());
    int port = 0;
    builder.AddListeningPort(
        address,
        Security::Insecure()->ServerCredentials(address, authenticator_),
        &port);
    builder.SetMaxReceiveMessageSize(-1);
    builder.RegisterCallbackGenericService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    target_ = GetParam() ? address : "127.0.0.1:" + std::to_string(port);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    stub_ = std::make_unique<grpc::GenericStub>(grpc::CreateCustomChannel(
        target_, grpc::InsecureChannelCredentials(), args));
  }
  void TearDown() override { server_->Shutdown(); }

  // Calls `method` with `payload` and the given headers.
  grpc::Status Call(const std::string& method, const std::string& payload,
                    std::multimap<std::string, std::string> headers) {
    grpc::Slice slice(payload);
    grpc::ByteBuffer request(&slice, 1);
    return Call(method, &request, std::move(headers));
  }
  grpc::Status Call(const std::string& method, grpc::ByteBuffer* request,
                    std::multimap<std::string, std::string> headers) {
    grpc::ClientContext context;
    for (auto& [k, v] : headers) context.AddMetadata(k, v);
    grpc::ByteBuffer response;
    absl::Notification done;
    grpc::Status status;
    stub_->UnaryCall(&context, method, grpc::StubOptions(), request, &response,
                     [&](grpc::Status s) {
                       status = s;
                       done.Notify();
                     });
    done.WaitForNotification();
    return status;
  }

  std::shared_ptr<Authenticator> authenticator_;
  EchoService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

TEST_P(AuthenticatorTest, TheTokenIsRequiredBeforeTheHandlerRuns) {
  EXPECT_EQ(Call("/x.Y/Z", "hi", {}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      Call("/x.Y/Z", "hi", {{"authorization", "Bearer wrong"}}).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(service_.handled, 0);
  EXPECT_TRUE(Call("/x.Y/Z", "hi", {{"authorization", "Bearer s3cret"}}).ok());
  EXPECT_EQ(service_.handled, 1);
}

TEST_P(AuthenticatorTest, AnAnonymousHundredMegabytesCostsTheServerNothing) {
  grpc::Slice big(std::string(100 << 20, 'x'));
  grpc::ByteBuffer request(&big, 1);
  const int64_t before = HeapInUse();
  EXPECT_EQ(Call("/x.Y/Z", &request, {}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The client's payload was allocated before `before` (and is sent without
  // a copy); the server buffered none of it (a few flow-control windows
  // at most).
  EXPECT_LT(HeapInUse() - before, int64_t{16} << 20);
  EXPECT_EQ(service_.handled, 0);
}

TEST_P(AuthenticatorTest, HealthChecksStayOpen) {
  EXPECT_TRUE(Call("/grpc.health.v1.Health/Check", "", {}).ok());
}

TEST_P(AuthenticatorTest, ACredentialNamesItsNodeUntilForgotten) {
  const std::string credential = NewCredential();
  const std::multimap<std::string, std::string> headers = {
      {"authorization", "Bearer s3cret"}, {kCredentialHeader, credential}};
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::nullopt);  // Not admitted yet.
  authenticator_->Admit(7, CredentialDigest(credential));
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::optional<uint64_t>(7));
  // A new incarnation of node 7: the old credential names nobody.
  const std::string next = NewCredential();
  authenticator_->Admit(7, CredentialDigest(next));
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::nullopt);
  authenticator_->Forget(7);
  ASSERT_TRUE(
      Call("/x.Y/Z", "hi",
           {{"authorization", "Bearer s3cret"}, {kCredentialHeader, next}})
          .ok());
  EXPECT_EQ(service_.node, std::nullopt);
}

TEST_P(AuthenticatorTest, AClientCredentialNeedsTheJobsClientKey) {
  const uint64_t client = kClient + 5;
  const std::multimap<std::string, std::string> headers = {
      {"authorization", "Bearer s3cret"},
      {kCredentialHeader, ClientCredential("key", client)}};
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::nullopt);  // No key yet.
  authenticator_->SetClientKey("key");
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::optional<uint64_t>(client));
  // Another node's id with this MAC, or a MAC under another key: nobody.
  std::string forged = ClientCredential("key", client);
  forged.replace(1, std::to_string(client).size(), std::to_string(client + 1));
  for (const std::string& bad :
       {forged, ClientCredential("other key", client)}) {
    ASSERT_TRUE(
        Call("/x.Y/Z", "hi",
             {{"authorization", "Bearer s3cret"}, {kCredentialHeader, bad}})
            .ok());
    EXPECT_EQ(service_.node, std::nullopt) << bad;
  }
  // A client that left names nobody any more.
  authenticator_->Forget(client);
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::nullopt);
}

TEST_P(AuthenticatorTest, AClientsOwnCredentialNamesItUntilItLeaves) {
  // On etcd a client makes its credential and publishes the digest.
  const uint64_t client = kClient + 9;
  const std::string credential = NewCredential();
  const std::multimap<std::string, std::string> headers = {
      {"authorization", "Bearer s3cret"}, {kCredentialHeader, credential}};
  authenticator_->Admit(client, CredentialDigest(credential));
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::optional<uint64_t>(client));
  authenticator_->Forget(client);
  ASSERT_TRUE(Call("/x.Y/Z", "hi", headers).ok());
  EXPECT_EQ(service_.node, std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(TcpAndUnixSocket, AuthenticatorTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "unix" : "tcp";
                         });

// Before the worker has joined the job it knows no credential: a call
// presenting one waits for the Join answer before its handler runs, off
// gRPC's callback threads (issue 25: such calls waited inside handlers,
// unbounded in number), at most --max_prejoin_calls at once and
// --prejoin_wait_ms each.
class PrejoinTest : public AuthenticatorTest {
 protected:
  explicit PrejoinTest(absl::Duration wait = absl::Seconds(30))
      : AuthenticatorTest({.token = "s3cret",
                           .prejoin_calls = Places(),
                           .prejoin_wait = wait,
                           .name = "worker3"},
                          /*joined=*/false) {}

  // One place, shared with the test (a worker shares it with its parked
  // calls).
  static std::shared_ptr<Quota> Places() {
    places_ = std::make_shared<Quota>(1);
    return places_;
  }
  static std::shared_ptr<Quota> places_;
};
std::shared_ptr<Quota> PrejoinTest::places_;

TEST_P(PrejoinTest, ACredentialWaitsForTheJoinBeforeItsHandler) {
  const std::multimap<std::string, std::string> headers = {
      {"authorization", "Bearer s3cret"}, {kCredentialHeader, NewCredential()}};
  grpc::Status first;
  std::thread caller([&] { first = Call("/x.Y/Z", "hi", headers); });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (places_->used() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(places_->used(), 1);
  EXPECT_EQ(service_.handled, 0);
  // No place left: the next is refused at once, naming the flag.
  grpc::Status second = Call("/x.Y/Z", "hi", headers);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(second.error_message(),
              AllOf(HasSubstr("worker3: this worker has not joined the job "
                              "yet and 1 calls already wait for it"),
                    HasSubstr("(--max_prejoin_calls=1)")));
  // A call without a credential has nothing to wait for.
  EXPECT_TRUE(Call("/x.Y/Z", "hi", {{"authorization", "Bearer s3cret"}}).ok());
  EXPECT_EQ(service_.handled, 1);
  authenticator_->SetClientKey("");  // The Join answer.
  caller.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(service_.handled, 2);
  EXPECT_EQ(places_->used(), 0);
}

class PrejoinWaitTest : public PrejoinTest {
 protected:
  PrejoinWaitTest() : PrejoinTest(absl::Milliseconds(50)) {}
};

TEST_P(PrejoinWaitTest, AWaitEndsAtPrejoinWait) {
  grpc::Status s =
      Call("/x.Y/Z", "hi",
           {{"authorization", "Bearer s3cret"}, {kCredentialHeader, "c1.x"}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(),
              AllOf(HasSubstr("worker3: this worker did not join the job "
                              "within 50 ms"),
                    HasSubstr("(--prejoin_wait_ms=50)")));
  EXPECT_EQ(service_.handled, 0);
  EXPECT_EQ(places_->used(), 0);
}

INSTANTIATE_TEST_SUITE_P(TcpAndUnixSocket, PrejoinTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "unix" : "tcp";
                         });
INSTANTIATE_TEST_SUITE_P(TcpAndUnixSocket, PrejoinWaitTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "unix" : "tcp";
                         });

// On etcd a newcomer's credential reaches a worker by its watch, perhaps
// after the newcomer's first call: the call waits for it, before its
// handler runs (and off gRPC's callback threads).
class LateAdmitTest : public AuthenticatorTest {
 protected:
  LateAdmitTest()
      : AuthenticatorTest({.token = "s3cret", .late_admits = true}) {}
};

TEST_P(LateAdmitTest, ACallWaitsForItsCredentialToBeAdmitted) {
  const uint64_t client = kClient + 3;
  const std::string credential = NewCredential();
  absl::Notification entered;
  service_.entered = &entered;
  grpc::Status status;
  std::thread caller([&] {
    status = Call(
        "/x.Y/Z", "hi",
        {{"authorization", "Bearer s3cret"}, {kCredentialHeader, credential}});
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(4);
  while (authenticator_->late_waits() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(authenticator_->late_waits(), 1u);
  EXPECT_FALSE(entered.HasBeenNotified());
  authenticator_->Admit(client, CredentialDigest(credential));
  caller.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(service_.node, std::optional<uint64_t>(client));
}

INSTANTIATE_TEST_SUITE_P(TcpAndUnixSocket, LateAdmitTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "unix" : "tcp";
                         });

TEST(CredentialTest, FreshAndDigestedOneWay) {
  const std::string a = NewCredential(), b = NewCredential();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(CredentialDigest(a), CredentialDigest(a));
  EXPECT_NE(CredentialDigest(a), a);
  EXPECT_EQ(CredentialDigest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ClaimTest, AClaimMustBeTheCallersOwnNode) {
  const Authenticator strict("", /*require_identity=*/true);
  EXPECT_TRUE(strict.CheckClaim(3, "holder", 3).ok());
  absl::Status other = strict.CheckClaim(3, "holder", kClient + 1);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other.message(),
            "holder claims client node 4294967297 but the call's credential "
            "is worker3");
  EXPECT_EQ(strict.CheckClaim(std::nullopt, "src", 1).code(),
            absl::StatusCode::kPermissionDenied);
  // Without identities (an --insecure job) a bare claim is believed; a
  // presented credential still counts.
  const Authenticator lax("");
  EXPECT_TRUE(lax.CheckClaim(std::nullopt, "src", 1).ok());
  EXPECT_EQ(lax.CheckClaim(2, "src", 1).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(ClaimTest, SomeCallsAreForClientsOnly) {
  const Authenticator strict("", /*require_identity=*/true);
  EXPECT_TRUE(strict.CheckClient(kClient + 1, "Shutdown").ok());
  EXPECT_EQ(strict.CheckClient(1, "Shutdown").message(),
            "Shutdown is for clients only; the caller is worker1");
  EXPECT_EQ(strict.CheckClient(std::nullopt, "Shutdown").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Authenticator("").CheckClient(std::nullopt, "Shutdown").ok());
}

}  // namespace
}  // namespace ferry
