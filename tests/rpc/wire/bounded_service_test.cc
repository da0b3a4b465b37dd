// BoundedService: a method's request reaches its handler only through
// BoundedParse; a refusal answers the call with its reason; a worker will
// not start with a method that would parse without bounds.
#include "rpc/wire/bounded_service.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/bench.grpc.pb.h"
#include "rpc/agent.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kEcho[] = "/ferry.proto.BareEcho/Echo";

Limits Small() {
  Limits limits;
  limits.max_items = 10;
  return limits;
}

// Echoes the payload; answers from another thread if `later`.
class EchoService final
    : public BoundedService<proto::BareEcho::CallbackService> {
 public:
  explicit EchoService(bool later = false)
      : BoundedService(ServiceOf<proto::EchoMessage>("BareEcho"), Small(),
                       "test"),
        later_(later) {
    Bound(&EchoService::Echo, "Echo");
  }
  ~EchoService() override {
    if (thread_.joinable()) thread_.join();
  }

  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const proto::EchoMessage* request,
                                 proto::EchoMessage* response) override {
    ++served_;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (!later_) {
      response->set_payload(request->payload());
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
    // The request and response stay valid until the call finishes: the
    // answer comes from another thread (gRPC allows Finish before the
    // handler returned, so nothing orders the two).
    if (thread_.joinable()) thread_.join();
    thread_ = std::thread([reactor, request, response] {
      response->set_payload(request->payload() + "!");
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

  int served() const { return served_.load(); }

 private:
  const bool later_;
  std::atomic<int> served_{0};
  std::thread thread_;
};

// A service that forgot its method.
class Forgetful final
    : public BoundedService<proto::BareEcho::CallbackService> {
 public:
  Forgetful()
      : BoundedService(ServiceOf<proto::EchoMessage>("BareEcho"), Limits(),
                       "") {}
};

class BoundedServiceTest : public ::testing::Test {
 protected:
  void Serve(bool later) {
    service_ = std::make_unique<EchoService>(later);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_->grpc_service());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    raw_ = std::make_unique<RawClient>(absl::StrCat("127.0.0.1:", port));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  std::unique_ptr<EchoService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RawClient> raw_;
};

TEST_F(BoundedServiceTest, HonestRequestsReachTheHandler) {
  for (bool later : {false, true}) {
    Serve(later);
    proto::EchoMessage m;
    m.set_payload("hello");
    RawReply r = raw_->Unary(kEcho, m.SerializeAsString());
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    proto::EchoMessage back;
    ASSERT_TRUE(back.ParseFromString(r.bytes));
    EXPECT_EQ(back.payload(), later ? "hello!" : "hello");
    EXPECT_EQ(service_->served(), 1);
    TearDown();
  }
}

TEST_F(BoundedServiceTest, ARequestOverALimitNeverReachesTheHandler) {
  Serve(false);
  std::string flood;
  for (int i = 0; i < 11; ++i) flood += std::string("\xc0\x3e\x00", 3);
  RawReply r = raw_->Unary(kEcho, flood);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("test: BareEcho/Echo: (unknown fields): more "
                              "than 10 items in one message"),
                    HasSubstr("(--max_items=10)")));
  RawReply bad = raw_->Unary(kEcho, std::string("\x0a\x09x", 3));
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.status.error_message(),
              HasSubstr("test: BareEcho/Echo: malformed message"));
  EXPECT_EQ(service_->served(), 0);
}

TEST_F(BoundedServiceTest, AMethodNotBoundIsNamed) {
  EXPECT_THAT(Forgetful().UnboundedMethods(),
              ::testing::ElementsAre("BareEcho/Echo"));
  EXPECT_TRUE(EchoService().UnboundedMethods().empty());
}

// The agent registers only bounded services, and not one with a method
// that is not.
TEST_F(BoundedServiceTest, AWorkerWillNotServeAnUnboundedMethod) {
  Forgetful forgetful;
  RpcAgent agent(AgentOptions{.name = "worker0", .listen = "127.0.0.1:0"});
  agent.AddService(&forgetful);
  EXPECT_THAT(agent.Start(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("worker0: BareEcho/Echo would parse requests "
                                 "without bounds")));
}

}  // namespace
}  // namespace ferry
