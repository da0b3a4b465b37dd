// A call's life on the worker that serves it: cancellation (the caller gone,
// its deadline passed) reaches the work and the in-flight counts at once,
// nested calls end with their parent, and a worker stopping while calls
// run answers each exactly once.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rpc/agent.h"
#include "tests/testing/calls_idle.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitNoCalls;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);

// "wait_for_cancel": resolves only when its call is cancelled, and says so.
struct CancelProbe {
  absl::Notification cancelled;
  absl::Status reason;
};

void RegisterWaitForCancel(WorkerImpl& w, std::shared_ptr<CancelProbe> probe) {
  ASSERT_OK(w.registry().RegisterAsync(
      "wait_for_cancel",
      [probe](const CallContext& ctx, std::vector<Value>) {
        Promise<Value> done;
        Cancellation* c = ctx.cancellation.get();
        c->OnCancel([probe, done, c] {
          probe->reason = c->reason();
          probe->cancelled.Notify();
          done.Set(c->reason());
        });
        return done.future();
      },
      "wait_for_cancel() -> null"));
}

TEST(CallLifecycleTest, DeadlinePassedCancelsTheWorkAndTheCount) {
  auto probe = std::make_shared<CancelProbe>();
  ASSERT_OK_AND_ASSIGN(auto job,
                       LocalJob::Start(2, {.setup = [&](WorkerImpl& w) {
                                         if (w.rank() == 1)
                                           RegisterWaitForCancel(w, probe);
                                       }}));
  RpcAgent& caller = job->worker(0).rpc();
  EXPECT_THAT(caller.RpcSync("worker1", "wait_for_cancel", {},
                             {.timeout = absl::Milliseconds(200)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(probe->cancelled.WaitForNotificationWithTimeout(kWait));
  EXPECT_THAT(probe->reason,
              StatusIs(absl::StatusCode::kCancelled,
                       HasSubstr("worker1: wait_for_cancel: cancelled")));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
  EXPECT_OK(caller.RpcSync("worker1", "echo", {1}));
}

TEST(CallLifecycleTest, CancelledSleepHoldsNothing) {
  ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(2));
  RpcAgent& caller = job->worker(0).rpc();
  EXPECT_THAT(caller.RpcSync("worker1", "sleep_ms", {600000},
                             {.timeout = absl::Milliseconds(100)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
  EXPECT_EQ(job->worker(1).rpc().Status().inflight(), 0);
}

TEST(CallLifecycleTest, NestedCallsEndWithTheirParent) {
  // worker1's relay waits on worker2's sleep; cancelling the relay's call
  // cancels the nested one, so worker2 is idle again too.
  auto nested = std::make_shared<absl::Status>();
  auto nested_done = std::make_shared<absl::Notification>();
  ASSERT_OK_AND_ASSIGN(
      auto job,
      LocalJob::Start(
          3, {.setup = [&](WorkerImpl& w) {
            if (w.rank() != 1) return;
            RpcAgent* agent = &w.rpc();
            ASSERT_OK(w.registry().RegisterAsync(
                "relay",
                [agent, nested, nested_done](const CallContext& ctx,
                                             std::vector<Value>) {
                  Future<Value> f = agent->RpcAsync("worker2", "sleep_ms",
                                                    {600000}, NestedIn(ctx));
                  f.Then([nested, nested_done](const absl::StatusOr<Value>& r) {
                    *nested = r.status();
                    nested_done->Notify();
                  });
                  return f;
                },
                "relay() -> null"));
          }}));
  EXPECT_THAT(job->worker(0).rpc().RpcSync(
                  "worker1", "relay", {}, {.timeout = absl::Milliseconds(300)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(nested_done->WaitForNotificationWithTimeout(kWait));
  // Cancelled with its parent, or cut by the parent's deadline it carried.
  EXPECT_TRUE(nested->code() == absl::StatusCode::kCancelled ||
              nested->code() == absl::StatusCode::kDeadlineExceeded)
      << *nested;
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(2).rpc(), kWait));
}

TEST(CallLifecycleTest, NestedCallOfACancelledParentIsCancelled) {
  // The parent's deadline is far; only its cancellation ends the nested
  // call.
  auto cancel = std::make_shared<Cancellation>();
  ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(2));
  Future<Value> f = job->worker(0).rpc().RpcAsync(
      "worker1", "sleep_ms", {600000}, {.cancellation = cancel});
  cancel->Cancel(absl::CancelledError("parent gone"));
  EXPECT_THAT(f.Wait(kWait),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("parent gone")));
  EXPECT_TRUE(AwaitNoCalls(job->worker(0).rpc(), kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
}

TEST(CallLifecycleTest, NestedCallCarriesTheParentDeadline) {
  ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(2));
  CallContext parent;
  parent.deadline = absl::Now() + absl::Milliseconds(100);
  EXPECT_THAT(job->worker(0).rpc().RpcSync("worker1", "sleep_ms", {600000},
                                           NestedIn(parent)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(CallLifecycleTest, StoppingWhileCallsRunAnswersEachOnce) {
  // Calls that finish while the worker aborts them: each is answered once
  // (by its result or by the stop), and nothing is touched after gRPC is
  // done with it (AddressSanitizer would see it).
  ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(2));
  RpcAgent& caller = job->worker(0).rpc();
  std::vector<Future<Value>> calls;
  for (int i = 0; i < 64; ++i) {
    calls.push_back(caller.RpcAsync("worker1", "sleep_ms", {i % 8},
                                    {.timeout = absl::Seconds(5)}));
  }
  job->worker(1).Stop();
  for (Future<Value>& f : calls) {
    absl::StatusOr<Value> r = f.Wait(kWait);
    // UNAVAILABLE from the stop; CANCELLED when gRPC's server shutdown
    // reset the stream before the answer was on the wire.
    EXPECT_TRUE(r.ok() || r.status().code() == absl::StatusCode::kUnavailable ||
                r.status().code() == absl::StatusCode::kCancelled)
        << r.status();
  }
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
}

TEST(CallLifecycleTest, FunctionsSeeTheWorkersLimits) {
  int64_t seen = 0;
  ASSERT_OK_AND_ASSIGN(
      auto job,
      LocalJob::Start(1, {.configure =
                              [](WorkerConfig& o) {
                                o.limits.max_alloc_bytes = 7 * Limits::kMiB;
                              },
                          .setup =
                              [&](WorkerImpl& w) {
                                ASSERT_OK(w.registry().Register(
                                    "alloc_limit", [&](const CallContext& ctx) {
                                      seen = ctx.limits->max_alloc_bytes;
                                      return Value();
                                    }));
                              }}));
  EXPECT_OK(job->worker(0).rpc().RpcSync("worker0", "alloc_limit", {}));
  EXPECT_EQ(seen, 7 * Limits::kMiB);
}

TEST(CallLifecycleTest, CallsPerPeerAreBounded) {
  ASSERT_OK_AND_ASSIGN(auto job,
                       LocalJob::Start(2, {.configure = [](WorkerConfig& o) {
                                         o.limits.max_inflight_per_peer = 2;
                                       }}));
  RpcAgent& caller = job->worker(0).rpc();
  std::vector<Future<Value>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(caller.RpcAsync("worker1", "sleep_ms", {1000}));
  }
  int ok = 0, refused = 0;
  for (Future<Value>& f : calls) {
    absl::StatusOr<Value> r = f.Wait(kWait);
    if (r.ok()) ++ok;
    if (r.status().code() == absl::StatusCode::kResourceExhausted) {
      ++refused;
      EXPECT_THAT(r.status(),
                  StatusIs(absl::StatusCode::kResourceExhausted,
                           HasSubstr("worker0 has 2 calls in flight here, "
                                     "over the limit of 2 calls "
                                     "(--max_inflight_per_peer=2)")));
    }
  }
  EXPECT_EQ(ok + refused, 6);
  EXPECT_GE(ok, 2);
  EXPECT_GE(refused, 1);
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
  EXPECT_OK(caller.RpcSync("worker1", "echo", {1}));
}

}  // namespace
}  // namespace ferry
