// What a streamed call's sender can hold at the server (issue 25, F5 and
// idle streams), on a server whose clock the test steps: a request that
// stops arriving is dropped --stream_ttl_ms after its stream began (and
// its bytes given back), a complete one cancels that, and streams past
// --max_open_streams, or past one peer's --max_open_streams_per_peer, are
// refused at once.
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
#include "rpc/builtins.h"
#include "rpc/call_service.h"
#include "rpc/peer_budget.h"
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
  CallStreamServiceTest() : timers_(&clock_), executor_(1) {
    EXPECT_TRUE(RegisterBuiltins(&registry_, &timers_).ok());
    Limits limits;
    limits.stream_ttl_ms = kTtlMs;
    // Three streams open at once, two of them one peer's.
    limits.max_open_streams = 3;
    limits.max_open_streams_per_peer = 2;
    open_streams_ = OpenStreamsBudget(limits);
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
    address_ = absl::StrCat("127.0.0.1:", port);
    raw_ = std::make_unique<RawClient>(address_);
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
  std::shared_ptr<PeerBudget> open_streams_;
  std::unique_ptr<CallService> calls_;
  std::unique_ptr<CallStreamService> streams_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
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
  RawClient other(address_);  // A connection (so a peer) of its own.
  auto a = raw_->Hold(kCallStreamMethod, {});
  auto b = other.Hold(kCallStreamMethod, {});
  auto c = other.Hold(kCallStreamMethod, {});
  ASSERT_TRUE(Eventually([&] { return open_streams_->used() == 3; }));
  RawClient third(address_);
  RawReply r = third.Stream(kCallStreamMethod, {}, kBound);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("worker1: 3 streams open here"),
                    HasSubstr("(--max_open_streams=3)")));
  // An idle stream holds its place only until --stream_ttl_ms.
  timers_.Advance(absl::Milliseconds(kTtlMs));
  for (auto* held : {a.get(), b.get(), c.get()}) {
    EXPECT_EQ(held->Wait(kBound).status.error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(Eventually([&] { return open_streams_->used() == 0; }));
}

// One peer holding streams open (a streamed sleep_ms holds one as long as
// it asks) has only its share: its next stream is refused naming it, and
// every other peer still opens streams. Before, the pool had no share per
// peer, and a few connections took all of it.
TEST_F(CallStreamServiceTest, OnePeerHasOnlyItsShareOfTheOpenStreams) {
  const std::string sleep = wire::CallRequest(
      "sleep_ms", {wire::Int(absl::ToInt64Milliseconds(kBound))}, 0);
  const std::vector<std::string> request = {wire::StreamHead(sleep.size()),
                                            wire::StreamChunk(sleep)};
  auto a = raw_->Hold(kCallStreamMethod, request);
  auto b = raw_->Hold(kCallStreamMethod, request);
  ASSERT_TRUE(Eventually([&] { return open_streams_->used() == 2; }));
  ASSERT_EQ(open_streams_->peers(), 1u);
  RawReply r = raw_->Stream(kCallStreamMethod, request, kBound);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(
      r.status.error_message(),
      AllOf(HasSubstr("worker1: the caller at ipv4:127.0.0.1:"),
            HasSubstr("would have 3 streams open here, over the limit of 2 "
                      "streams (--max_open_streams_per_peer=2)")));
  // Another peer is served.
  RawClient other(address_);
  const std::string echo = wire::CallRequest("echo", {wire::Int(9)}, 0);
  RawReply served = other.Stream(
      kCallStreamMethod,
      {wire::StreamHead(echo.size()), wire::StreamChunk(echo)}, kBound);
  EXPECT_TRUE(served.status.ok()) << served.status.error_message();
  // The sleeps end with the test's clock; their places come back.
  timers_.Advance(kBound);
  EXPECT_TRUE(a->Wait(kBound).status.ok());
  EXPECT_TRUE(b->Wait(kBound).status.ok());
  EXPECT_TRUE(Eventually([&] { return open_streams_->used() == 0; }));
}

}  // namespace
}  // namespace ferry
