// Calls large enough to travel as streams (rpc/stream_call.h,
// rpc/call_stream_service.h) between two workers: values arrive intact,
// tensors land aligned in the receiver's buffer, limits bound both
// directions by --max_message_mb, and cancellation and deadlines work as
// for unary calls. On one host they travel in memory files
// (rpc/shm_message.h) once the callee showed it opens the caller's.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rpc/agent.h"
#include "rpc/chunked_message.h"
#include "rpc/metrics.h"
#include "rpc/value/tensor.h"
#include "tests/testing/calls_idle.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitNoCalls;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);

// A float32 tensor of `n` elements, each its index: past kStreamMinBytes
// for n ≥ 2^19 + 1.
Tensor Counting(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return Tensor::FromVector(v);
}

// Bytes `agent` moved to (`family` "sent") or from ("received") worker1 in
// memory files, by its metrics.
double InFiles(RpcAgent& agent, absl::string_view family) {
  const std::string prefix = absl::StrCat(
      "ferry_peer_", family, "_bytes_total{kind=\"call_shm\",peer=\"worker1\"");
  for (absl::string_view line : absl::StrSplit(agent.metrics()->Text(), '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
  }
  return 0;
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.bytes() == b.bytes();
}

TEST(StreamCallTest, LargeValuesEchoIntactAndAligned) {
  ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(2));
  RpcAgent& caller = job->worker(0).rpc();
  const Tensor big = Counting((int64_t{5} << 20) / 4 + 3);
  ASSERT_GE(big.nbytes(), kStreamMinBytes);
  Value::List items = {Value("before"), Value(big), Value(int64_t{7}),
                       Value(Value::List{Value(Counting(100))})};
  ASSERT_OK_AND_ASSIGN(Value r,
                       caller.RpcSync("worker1", "echo", {Value(items)}));
  ASSERT_TRUE(r.is_list());
  ASSERT_EQ(r.as_list().size(), 4u);
  EXPECT_EQ(r.as_list()[0].as_string(), "before");
  const Tensor& got = r.as_list()[1].as_tensor();
  EXPECT_TRUE(SameTensor(got, big));
  // The largest piece lands 64-byte aligned in the reply's buffer, so the
  // tensor references it (no copy needed for alignment).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data()) % 64, 0u);
  EXPECT_EQ(r.as_list()[2].as_int(), 7);
  EXPECT_TRUE(
      SameTensor(r.as_list()[3].as_list()[0].as_tensor(), Counting(100)));
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
}

TEST(StreamCallTest, OnOneHostLargeMessagesGoInMemoryFiles) {
  ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(2));
  RpcAgent& caller = job->worker(0).rpc();
  const Tensor big = Counting(int64_t{3} << 20);  // 12 MiB.
  // The first request goes as frames; its reply, in the file the caller
  // offered, shows the callee opens the caller's files, so the second
  // request goes in one too.
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(Value r,
                         caller.RpcSync("worker1", "echo", {Value(big)}));
    const Tensor& got = r.as_tensor();
    EXPECT_TRUE(SameTensor(got, big));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data()) % 64, 0u);
    EXPECT_GT(InFiles(caller, "received"), (i + 1) * 12e6);
    if (i == 0) {
      EXPECT_EQ(InFiles(caller, "sent"), 0);
    }
  }
  EXPECT_GT(InFiles(caller, "sent"), 12e6);
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
}

TEST(StreamCallTest, WithoutSharedMemoryLargeMessagesGoAsFrames) {
  ASSERT_OK_AND_ASSIGN(auto job,
                       LocalJob::Start(2, {.configure = [](WorkerConfig& o) {
                                         o.channels.use_shared_memory = false;
                                       }}));
  RpcAgent& caller = job->worker(0).rpc();
  const Tensor big = Counting(int64_t{3} << 20);
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(Value r,
                         caller.RpcSync("worker1", "echo", {Value(big)}));
    EXPECT_TRUE(SameTensor(r.as_tensor(), big));
  }
  EXPECT_EQ(InFiles(caller, "sent"), 0);
  EXPECT_EQ(InFiles(caller, "received"), 0);
}

TEST(StreamCallTest, RequestOverTheCalleesLimitIsRefused) {
  ASSERT_OK_AND_ASSIGN(
      auto job, LocalJob::Start(2, {.configure = [](WorkerConfig& o) {
                                  o.limits.max_message_bytes = 3 * Limits::kMiB;
                                }}));
  RpcAgent& caller = job->worker(0).rpc();
  EXPECT_THAT(
      caller.RpcSync("worker1", "echo", {Value(Counting(int64_t{1} << 20))}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("(--max_message_mb=3)")));
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
  EXPECT_OK(caller.RpcSync("worker1", "echo", {Value(Counting(600000))}));
}

TEST(StreamCallTest, ReplyOverTheCallersLimitIsRefused) {
  ASSERT_OK_AND_ASSIGN(
      auto job,
      LocalJob::Start(
          2, {.configure =
                  [](WorkerConfig& o) {
                    o.limits.max_message_bytes = 3 * Limits::kMiB;
                  },
              .setup =
                  [](WorkerImpl& w) {
                    // Its argument, twice: a reply twice the request.
                    ASSERT_OK(w.registry().Register(
                        "twice", [](const Tensor& t) -> Value {
                          return Value(Value::List{Value(t), Value(t)});
                        }));
                  }}));
  RpcAgent& caller = job->worker(0).rpc();
  EXPECT_THAT(caller.RpcSync("worker1", "twice", {Value(Counting(600000))}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("reply: a message of")));
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
}

TEST(StreamCallTest, DeadlineCancelsAStreamedCall) {
  auto cancelled = std::make_shared<absl::Notification>();
  ASSERT_OK_AND_ASSIGN(
      auto job,
      LocalJob::Start(
          2, {.setup = [&](WorkerImpl& w) {
            ASSERT_OK(w.registry().RegisterAsync(
                "hold",
                [cancelled](const CallContext& ctx, std::vector<Value>) {
                  Promise<Value> done;
                  Cancellation* c = ctx.cancellation.get();
                  c->OnCancel([cancelled, done, c] {
                    cancelled->Notify();
                    done.Set(c->reason());
                  });
                  return done.future();
                },
                "hold(tensor) -> null"));
          }}));
  RpcAgent& caller = job->worker(0).rpc();
  EXPECT_THAT(caller.RpcSync("worker1", "hold", {Value(Counting(700000))},
                             {.timeout = absl::Milliseconds(300)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(cancelled->WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(AwaitNoCalls(caller, kWait));
  EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), kWait));
}

}  // namespace
}  // namespace ferry
