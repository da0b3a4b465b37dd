// Calls that arrive before the worker joined the job (CallService::Open)
// wait without a thread, bounded in number (--max_prejoin_calls) and in
// time (--prejoin_wait_ms, on the worker's clock: stepped by hand here),
// and leave at once when their caller goes away (issue 25: pre-formation
// waits were unbounded in time and a cancelled one stayed until Open).
#include "rpc/call_service.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"
#include "rpc/base/executor.h"
#include "rpc/base/quota.h"
#include "rpc/builtins.h"
#include "rpc/registry.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/raw_client.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr absl::Duration kWait = absl::Milliseconds(1000);

// A call's other end: records its one answer; the test cancels it. The
// answer leaves at once, or (hold_reply) when the test says it was read.
class FakeResponder final : public CallResponder {
 public:
  explicit FakeResponder(bool hold_reply = false) : hold_reply_(hold_reply) {}

  void Respond(grpc::ByteBuffer* reply, const grpc::Status& status,
               std::function<void()> ended) override {
    {
      absl::MutexLock lock(&mu_);
      ++answers_;
      status_ = status;
      if (status.ok() && reply != nullptr) {
        std::vector<grpc::Slice> slices;
        if (reply->Dump(&slices).ok()) {
          for (const grpc::Slice& s : slices) {
            reply_.append(reinterpret_cast<const char*>(s.begin()), s.size());
          }
        }
      }
      if (hold_reply_) ended_ = std::move(ended);
    }
    // A reply not held has left before the test sees its answer (else the
    // test may step past its TTL first); and nothing here touches this
    // responder after Notify, which may let the test destroy it.
    if (!hold_reply_ && ended) ended();
    answered_.Notify();
  }
  // The caller read the held answer (or its call ended).
  void End() {
    std::function<void()> ended;
    {
      absl::MutexLock lock(&mu_);
      ended = std::move(ended_);
    }
    if (ended) ended();
  }
  void CancelUnsent() override {
    {
      absl::MutexLock lock(&mu_);
      ++unsent_cancels_;
    }
    End();
  }
  int unsent_cancels() const {
    absl::MutexLock lock(&mu_);
    return unsent_cancels_;
  }
  std::string reply() const {
    absl::MutexLock lock(&mu_);
    return reply_;
  }
  void OnCancelled(std::function<void()> f) override {
    absl::MutexLock lock(&mu_);
    on_cancel_ = std::move(f);
  }
  // The caller goes away.
  void Cancel() {
    std::function<void()> f;
    {
      absl::MutexLock lock(&mu_);
      f = std::move(on_cancel_);
    }
    if (f) f();
  }
  // Its answer, once it came (bounded: a lost one is an error).
  grpc::Status Answer() {
    if (!answered_.WaitForNotificationWithTimeout(absl::Seconds(10))) {
      return grpc::Status(grpc::StatusCode::UNKNOWN, "never answered");
    }
    absl::MutexLock lock(&mu_);
    return status_;
  }
  bool answered() const { return answered_.HasBeenNotified(); }
  int answers() const {
    absl::MutexLock lock(&mu_);
    return answers_;
  }

 private:
  mutable absl::Mutex mu_;
  int answers_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_cancel_ ABSL_GUARDED_BY(mu_);
  absl::Notification answered_;
  const bool hold_reply_;
  std::string reply_ ABSL_GUARDED_BY(mu_);
  std::function<void()> ended_ ABSL_GUARDED_BY(mu_);
  int unsent_cancels_ ABSL_GUARDED_BY(mu_) = 0;
};

class ParkedCallsTest : public ::testing::Test {
 protected:
  ParkedCallsTest()
      : timers_(&clock_), executor_(1), prejoin_(std::make_shared<Quota>(2)) {
    EXPECT_TRUE(RegisterBuiltins(&registry_, &timers_).ok());
    Limits limits;
    limits.max_prejoin_calls = 2;
    limits.prejoin_wait_ms = absl::ToInt64Milliseconds(kWait);
    calls_ = std::make_unique<CallService>(CallService::Options{
        .worker_name = "worker1",
        .limits = limits,
        .registry = &registry_,
        .executor = &executor_,
        .clock = &clock_,
        .start_closed = true,
        .prejoin_calls = prejoin_,
        .timers = &timers_,
    });
  }

  // An echo call from an anonymous caller, served through `responder`.
  void Call(FakeResponder* responder) {
    grpc::Slice bytes(wire::CallRequest("echo", {wire::Int(5)}, 0));
    calls_->Serve(&context_, grpc::ByteBuffer(&bytes, 1), responder);
  }

  ManualClock clock_;
  ManualTimers timers_;
  Registry registry_;
  Executor executor_;
  std::shared_ptr<Quota> prejoin_;
  grpc::CallbackServerContext context_;
  std::unique_ptr<CallService> calls_;
};

TEST_F(ParkedCallsTest, AWaitingCallIsAnsweredAtPrejoinWait) {
  FakeResponder r;
  Call(&r);
  EXPECT_EQ(prejoin_->used(), 1);
  timers_.Advance(kWait - absl::Milliseconds(1));
  EXPECT_FALSE(r.answered());
  timers_.Advance(absl::Milliseconds(1));
  grpc::Status s = r.Answer();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(),
              AllOf(HasSubstr("worker1: this worker did not join the job "
                              "within 1000 ms"),
                    HasSubstr("(--prejoin_wait_ms=1000)")));
  EXPECT_EQ(prejoin_->used(), 0);
  calls_->Open();  // Nothing left to serve.
  EXPECT_EQ(r.answers(), 1);
}

TEST_F(ParkedCallsTest, CallsPastTheCountAreRefusedAtOnce) {
  FakeResponder a, b, c;
  Call(&a);
  Call(&b);
  Call(&c);
  grpc::Status s = c.Answer();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(),
              AllOf(HasSubstr("has not joined the job yet and 2 calls "
                              "already wait for it"),
                    HasSubstr("(--max_prejoin_calls=2)")));
  EXPECT_FALSE(a.answered());
  calls_->Open();  // The two that waited run now.
  EXPECT_TRUE(a.Answer().ok()) << a.Answer().error_message();
  EXPECT_TRUE(b.Answer().ok()) << b.Answer().error_message();
  EXPECT_EQ(prejoin_->used(), 0);
  EXPECT_FALSE(timers_.has_pending());  // Their expiries were cancelled.
}

TEST_F(ParkedCallsTest, ACallWhoseCallerLeftGoesAtOnce) {
  FakeResponder gone, kept;
  Call(&gone);
  Call(&kept);
  gone.Cancel();
  EXPECT_EQ(gone.Answer().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(prejoin_->used(), 1);
  FakeResponder next;  // Its place is free again.
  Call(&next);
  EXPECT_FALSE(next.answered());
  calls_->Open();
  EXPECT_TRUE(kept.Answer().ok());
  EXPECT_TRUE(next.Answer().ok());
  EXPECT_EQ(gone.answers(), 1);
}

TEST_F(ParkedCallsTest, AbortAnswersEveryWaitingCall) {
  FakeResponder a;
  Call(&a);
  calls_->Abort(absl::UnavailableError("worker1 stopped"));
  EXPECT_THAT(a.Answer().error_message(), HasSubstr("worker1 stopped"));
  EXPECT_EQ(prejoin_->used(), 0);
  timers_.Advance(kWait);
  EXPECT_EQ(a.answers(), 1);
}

// ---- What an answered call holds until its reply left (issue 49 R1) ----

constexpr uint64_t kClient = kFirstClientNode + 7;
constexpr int64_t kReplyTtlMs = 1000;

// An open service (no join to wait for) whose tests step its clock.
class ReplyAccountingTest : public ::testing::Test {
 protected:
  ReplyAccountingTest() : timers_(&clock_), executor_(1) {
    EXPECT_TRUE(RegisterBuiltins(&registry_, &timers_).ok());
    EXPECT_TRUE(registry_
                    .Register("whoami",
                              [](const CallContext& ctx) { return ctx.caller; })
                    .ok());
    Limits limits;
    limits.max_inflight_per_peer = 2;
    limits.max_reply_bytes_per_peer = 100 << 10;
    limits.reply_ttl_ms = kReplyTtlMs;
    calls_ = std::make_unique<CallService>(CallService::Options{
        .worker_name = "worker1",
        .limits = limits,
        .registry = &registry_,
        .executor = &executor_,
        .clock = &clock_,
        .timers = &timers_,
    });
  }

  void Call(FakeResponder* responder, const std::string& request) {
    grpc::Slice bytes(request);
    calls_->Serve(&context_, grpc::ByteBuffer(&bytes, 1), responder);
  }
  // A 64 KiB result (16384 float32 zeros) for `caller`.
  static std::string Zeros64K(uint64_t caller = kClient) {
    return wire::CallRequest("zeros", {wire::List({wire::Int(16384)})}, caller);
  }

  ManualClock clock_;
  ManualTimers timers_;
  Registry registry_;
  Executor executor_;
  grpc::CallbackServerContext context_;
  std::unique_ptr<CallService> calls_;
};

// On 1dde932 a call left its caller's count when answered: a caller that
// never read its replies had every one of them held.
TEST_F(ReplyAccountingTest, ACallCountsAgainstItsCallerUntilItsReplyLeft) {
  const std::string add =
      wire::CallRequest("add", {wire::Int(1), wire::Int(2)}, kClient);
  FakeResponder a(/*hold_reply=*/true), b(true), c;
  Call(&a, add);
  Call(&b, add);
  ASSERT_TRUE(a.Answer().ok()) << a.Answer().error_message();
  ASSERT_TRUE(b.Answer().ok()) << b.Answer().error_message();
  EXPECT_EQ(calls_->inflight(), 0);  // Answered: nothing executes.
  Call(&c, add);
  EXPECT_EQ(c.Answer().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(c.Answer().error_message(),
              AllOf(HasSubstr(absl::StrCat(IdentityLabel(kClient),
                                           " has 2 calls in flight here")),
                    HasSubstr("(--max_inflight_per_peer=2)")));
  a.End();  // Its reply was written.
  FakeResponder d;
  Call(&d, add);
  EXPECT_TRUE(d.Answer().ok()) << d.Answer().error_message();
  b.End();
}

TEST_F(ReplyAccountingTest, RepliesNotSentAreBoundedPerCallerInBytes) {
  FakeResponder first(/*hold_reply=*/true), second(true), other(true);
  Call(&first, Zeros64K());
  ASSERT_TRUE(first.Answer().ok()) << first.Answer().error_message();
  EXPECT_EQ(calls_->replies().used_by(IdentityLabel(kClient)),
            static_cast<int64_t>(first.reply().size()));
  Call(&second, Zeros64K());
  EXPECT_EQ(second.Answer().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(
      second.Answer().error_message(),
      AllOf(HasSubstr(absl::StrCat("worker1: zeros: ", IdentityLabel(kClient),
                                   " would hold")),
            HasSubstr("of replies not yet sent here"),
            HasSubstr("(--max_reply_mb_per_peer=0)")));
  EXPECT_TRUE(second.reply().empty());
  // Another caller has a share of its own.
  Call(&other, Zeros64K(kClient + 1));
  EXPECT_TRUE(other.Answer().ok()) << other.Answer().error_message();
  first.End();
  second.End();
  other.End();
  EXPECT_EQ(calls_->replies().used(), 0);
}

TEST_F(ReplyAccountingTest, AReplyThatDoesNotLeaveIsCancelledAtItsTtl) {
  FakeResponder stuck(/*hold_reply=*/true);
  Call(&stuck, Zeros64K());
  ASSERT_TRUE(stuck.Answer().ok()) << stuck.Answer().error_message();
  timers_.Advance(absl::Milliseconds(kReplyTtlMs - 1));
  EXPECT_EQ(stuck.unsent_cancels(), 0);
  EXPECT_GT(calls_->replies().used(), 0);
  timers_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(stuck.unsent_cancels(), 1);
  EXPECT_EQ(calls_->replies().used(), 0);
  // Its slot and bytes are back: the caller is served again, and a reply
  // that left in time is never cancelled.
  FakeResponder next;
  Call(&next, Zeros64K());
  EXPECT_TRUE(next.Answer().ok()) << next.Answer().error_message();
  timers_.Advance(absl::Milliseconds(kReplyTtlMs));
  EXPECT_EQ(next.unsent_cancels(), 0);
}

// Issue 49 R8: caller_name is free text; a client named worker0 appeared
// as worker0 in errors, stacks and spans. The caller is its node's.
TEST_F(ReplyAccountingTest, TheCallerIsItsNodeNotTheNameItClaims) {
  FakeResponder r;
  Call(&r, wire::CallRequest("whoami", {}, kClient, "worker0"));
  ASSERT_TRUE(r.Answer().ok()) << r.Answer().error_message();
  absl::StatusOr<proto::Value> result =
      ::ferry::testing::ParseResult(r.reply());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->string_value(), IdentityLabel(kClient));
}

// Issue 49 R8: NOT_FOUND echoed a 256 KiB function name whole.
TEST_F(ReplyAccountingTest, AnUnknownFunctionIsEchoedBoundedAndEscaped) {
  FakeResponder big, odd;
  Call(&big, wire::CallRequest(std::string(256 << 10, 'f'), {}, kClient));
  EXPECT_EQ(big.Answer().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(big.Answer().error_message(),
              AllOf(HasSubstr("worker1: ffff"), HasSubstr("(262144 bytes)"),
                    HasSubstr("no such function")));
  EXPECT_LT(big.Answer().error_message().size(), 256u);
  Call(&odd, wire::CallRequest("no\nsuch\x1b", {}, kClient));
  EXPECT_THAT(odd.Answer().error_message(),
              HasSubstr("worker1: no\\nsuch\\x1b: no such function"));
}

}  // namespace
}  // namespace ferry
