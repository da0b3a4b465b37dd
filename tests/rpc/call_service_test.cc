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

// A call's other end: records its one answer; the test cancels it.
class FakeResponder final : public CallResponder {
 public:
  void Respond(grpc::ByteBuffer*, const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    ++answers_;
    status_ = status;
    answered_.Notify();
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

}  // namespace
}  // namespace ferry
