// What a streamed call's sender can hold at the server (issue 25, F5 and
// idle streams), on a server whose clock the test steps: a request that
// stops arriving is dropped --stream_ttl_ms after its stream began (and
// its bytes given back), a complete one cancels that, and streams past
// --max_open_streams are refused at once.
#include "rpc/call_stream_service.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/call_stream.pb.h"
#include "rpc/base/executor.h"
#include "rpc/base/quota.h"
#include "rpc/builtins.h"
#include "rpc/call_service.h"
#include "rpc/registry.h"
#include "rpc/wire/frames.h"
#include "tests/testing/await.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/raw_client.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::kCallStreamMethod;
using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr int64_t kTtlMs = 1000;
constexpr absl::Duration kBound = absl::Seconds(10);

class CallStreamServiceTest : public ::testing::Test {
 protected:
  CallStreamServiceTest()
      : timers_(&clock_),
        executor_(1),
        open_streams_(std::make_shared<Quota>(2)) {
    EXPECT_TRUE(RegisterBuiltins(&registry_, &timers_).ok());
    Limits limits;
    limits.stream_ttl_ms = kTtlMs;
    calls_ = std::make_unique<CallService>(CallService::Options{
        .worker_name = "worker1",
        .limits = limits,
        .registry = &registry_,
        .executor = &executor_,
        .clock = &clock_,
        .timers = &timers_,
    });
    streams_ = std::make_unique<CallStreamService>(
        calls_.get(), CallStreamService::Options{
                          .timers = &timers_, .open_streams = open_streams_});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(streams_.get());
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
    raw_ = std::make_unique<RawClient>(absl::StrCat("127.0.0.1:", port));
  }
  ~CallStreamServiceTest() override {
    server_->Shutdown();
    calls_->Abort(absl::UnavailableError("test over"));
  }

  // Polls (bounded) until `done`; whether it came.
  static bool Eventually(const std::function<bool()>& done) {
    return AwaitTrue(done, kBound);
  }

  ManualClock clock_;
  ManualTimers timers_;
  Registry registry_;
  Executor executor_;
  std::shared_ptr<Quota> open_streams_;
  std::unique_ptr<CallService> calls_;
  std::unique_ptr<CallStreamService> streams_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RawClient> raw_;
};

TEST_F(CallStreamServiceTest, ARequestThatStopsArrivingExpires) {
  auto held = raw_->Hold(
      kCallStreamMethod,
      {wire::StreamHead(1 << 20), wire::StreamChunk(std::string(4096, 'x'))});
  ASSERT_TRUE(Eventually([&] { return streams_->budget().used() > 0; }));
  EXPECT_LE(streams_->budget().used(), 2 * 4096 + 128);  // What arrived.
  timers_.Advance(absl::Milliseconds(kTtlMs - 1));
  EXPECT_EQ(held->Wait(absl::ZeroDuration()).status.error_message(),
            "not ended");
  timers_.Advance(absl::Milliseconds(1));
  RawReply r = held->Wait(kBound);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("worker1: request: 4096 of 1048576 bytes "
                              "received within 1000 ms"),
                    HasSubstr("(--stream_ttl_ms=1000)")));
  EXPECT_TRUE(Eventually([&] {
    return streams_->budget().used() == 0 && open_streams_->used() == 0;
  }));
}

TEST_F(CallStreamServiceTest, AWholeRequestIsServedAndItsExpiryCancelled) {
  const std::string request = wire::CallRequest("echo", {wire::Int(9)}, 0);
  RawReply r = raw_->Stream(
      kCallStreamMethod,
      {wire::StreamHead(request.size()), wire::StreamChunk(request)}, kBound);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // A small reply is one frame, its head announcing its payload.
  ASSERT_EQ(r.messages.size(), 1u);
  proto::StreamHead head;
  grpc::Slice slice(r.messages[0]);
  const grpc::ByteBuffer reply(&slice, 1);
  absl::StatusOr<WireFrame> frame = ReadFrame(reply, 64, "reply", &head);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_GT(frame->payload_bytes, 0);
  EXPECT_EQ(head.total(), static_cast<uint64_t>(frame->payload_bytes));
  EXPECT_TRUE(Eventually([&] { return !timers_.has_pending(); }));
  EXPECT_TRUE(Eventually([&] { return streams_->budget().used() == 0; }));
}

TEST_F(CallStreamServiceTest, StreamsPastTheCapAreRefusedAtOnce) {
  auto a = raw_->Hold(kCallStreamMethod, {});
  auto b = raw_->Hold(kCallStreamMethod, {});
  ASSERT_TRUE(Eventually([&] { return open_streams_->used() == 2; }));
  RawReply r = raw_->Stream(kCallStreamMethod, {}, kBound);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("worker1: 2 streams are open here"),
                    HasSubstr("(--max_open_streams=2)")));
  // An idle stream holds its place only until --stream_ttl_ms.
  timers_.Advance(absl::Milliseconds(kTtlMs));
  EXPECT_EQ(a->Wait(kBound).status.error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(b->Wait(kBound).status.error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(Eventually([&] { return open_streams_->used() == 0; }));
}

}  // namespace
}  // namespace ferry
