// Hostile bytes against the decoders of real ferryd daemons (issue 25):
// sent with raw gRPC clients (tests/testing/raw_exchange.h, raw_client.h),
// no ferry code on the sending side. Each case must get its specific code,
// and the worker must live on: alive, answering, its memory about where it
// was, and still serving honest work.
//
//   F1  a collective frame whose tensor ends inside its own data field, for
//       an op awaiting a 64 KiB tensor: was a heap overflow in the worker.
//   F3  20 MiB of empty RRefHandles to RRefs/RenewLease: grew the worker by
//       ~45 times what was sent before the request was refused.
#include <signal.h>

#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.pb.h"
#include "proto/rref.pb.h"
#include "proto/worker.pb.h"
#include "rpc/auth/security.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/raw_exchange.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::DataHeader;
using ::ferry::testing::FrameBytes;
using ::ferry::testing::kCallMethod;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::SendFrames;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kFloat32 = 9;  // proto/value.proto's DType numbers.
// A hostile message is answered long before this; it only tells a hang.
constexpr absl::Duration kAnswered = absl::Seconds(10);
// Bound on waiting for a worker to reach a state (an op begun, memory
// given back).
constexpr absl::Duration kSettle = absl::Seconds(15);

absl::Status ToAbsl(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

// A field of /proc/PID/status in bytes ("VmRSS", "VmHWM"); -1 if absent.
int64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::string kb(absl::StripAsciiWhitespace(
        absl::string_view(line).substr(field.size() + 1)));
    kb = kb.substr(0, kb.find(' '));
    int64_t v = 0;
    return absl::SimpleAtoi(kb, &v) ? v * 1024 : -1;
  }
  return -1;
}

// Resets the process's peak resident size (VmHWM) to its current one, so
// a case measures its own peak (Linux: /proc/PID/clear_refs "5"; without
// the right to, the peak since the worker began is measured, which only
// makes the bound easier to meet).
void ResetPeak(pid_t pid) {
  std::ofstream(absl::StrCat("/proc/", pid, "/clear_refs")) << "5";
}

// Waits (bounded) until `ok(status)` for the worker `raw` talks to.
template <typename Pred>
bool Settles(RawClient& raw, Pred ok) {
  return AwaitTrue(
      [&] {
        absl::StatusOr<proto::WorkerStatus> s = raw.Status();
        return s.ok() && ok(*s);
      },
      kSettle, absl::Milliseconds(20));
}

// ---- F1: collective frames (a job without a token: claims believed, so
// any process that reaches a worker may send as any rank) ----

class HostileFramesTest : public ::testing::Test {
 protected:
  static constexpr int kWorld = 3;

  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
        DaemonCluster::UpWithoutToken(kWorld, {"--mailbox_ttl_ms=2000"});
    ASSERT_OK(job);
    job_ = job->release();
  }
  static void TearDownTestSuite() {
    delete job_;
    job_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(job_, nullptr); }

  static std::shared_ptr<grpc::Channel> ChannelTo(int rank) {
    return grpc::CreateChannel(job_->address(rank),
                               grpc::InsecureChannelCredentials());
  }

  static DaemonCluster* job_;
};

DaemonCluster* HostileFramesTest::job_ = nullptr;

// The worker lives on and serves an honest call.
void ExpectServes(const DaemonCluster& job, int rank, RawClient& raw) {
  EXPECT_EQ(kill(job.pid(rank), 0), 0) << "worker" << rank << " died";
  const std::string echo =
      raw.node() != 0 ? wire::CallRequest("echo", {wire::Int(42)}, raw.node())
                      : wire::CallRequest("echo", {wire::Int(42)});
  RawReply honest = raw.Unary(kCallMethod, echo);
  ASSERT_TRUE(honest.status.ok()) << honest.status.error_message();
  absl::StatusOr<proto::Value> v = testing::ParseResult(honest.bytes);
  ASSERT_OK(v);
  EXPECT_EQ(v->int_value(), 42);
}

TEST_F(HostileFramesTest, TensorEndingInsideItsOwnDataField) {
  constexpr int64_t kBlock = 64 << 10;  // Bytes rank 2 is to send rank 1.
  RawClient raw(job_->address(1));
  // Worker1 runs all_to_all_single of 3 blocks of 64 KiB: it awaits rank
  // 2's block with a 64 KiB landing in its output. Ranks 0 and 2 never
  // join the op.
  // A client's op ids are its own: "<its node>.<anything>".
  ASSERT_OK(raw.Register());
  const std::string op_id = absl::StrCat(raw.node(), ".hostile.f1");
  const std::string input =
      wire::Tensor(kFloat32, {3 * kBlock / 4}, std::string(3 * kBlock, '\0'));
  std::future<RawReply> op = std::async(std::launch::async, [&] {
    return raw.Unary(
        kCallMethod,
        wire::CallRequest("ferry.collective",
                          {wire::Str("all_to_all_single"), wire::Str(op_id),
                           input, wire::Null(), wire::Int(5000)},
                          raw.node()),
        kAnswered);
  });
  if (!Settles(raw, [](const proto::WorkerStatus& s) {
        return s.collectives_inflight() > 0;
      })) {
    const RawReply early = op.get();
    FAIL() << "the op never ran: " << early.status.error_code() << " "
           << early.status.error_message();
  }
  const std::string payload =
      ferry::testing::TensorPastItsEndPayload(kBlock, kBlock);
  const std::string key = absl::StrCat("world/t:", op_id);
  const absl::Status refused = ToAbsl(SendFrames(
      ChannelTo(1),
      {FrameBytes(DataHeader(key, 0, 2, static_cast<int64_t>(payload.size())),
                  payload)},
      kAnswered));
  std::cout << "F1 frame: " << refused << "\n";
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument,
                                AllOf(HasSubstr(absl::StrCat("op ", key)),
                                      HasSubstr("rank 2"),
                                      HasSubstr("message.tensor"))));
  // The op itself times out on worker1, naming the ranks that never came.
  RawReply ended = op.get();
  std::cout << "F1 op: " << ended.status.error_code() << " "
            << ended.status.error_message() << "\n";
  EXPECT_EQ(ended.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << ended.status.error_message();
  ExpectServes(*job_, 1, raw);
  EXPECT_TRUE(Settles(raw, [](const proto::WorkerStatus& s) {
    return s.collectives_inflight() == 0 && s.mailbox_bytes() == 0;
  }));
}

// ---- F3: requests parsed by generated code (a job with a token; the
// sender has it, as every process of the job does) ----

class HostileRequestsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonCluster>> job = DaemonCluster::Up(1);
    ASSERT_OK(job);
    job_ = job->release();
    absl::StatusOr<std::string> token =
        ReadSecretFile(job_->token_file(), "--token_file");
    ASSERT_OK(token);
    token_ = new std::string(absl::StripAsciiWhitespace(*token));
  }
  static void TearDownTestSuite() {
    delete job_;
    job_ = nullptr;
    delete token_;
    token_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(job_, nullptr); }

  // `request` to `method` of worker0; the reply, and how much the worker's
  // peak resident memory grew meanwhile.
  RawReply SendMeasured(const std::string& method, std::string request,
                        int64_t* peak_growth) {
    RawClient raw(job_->address(0), *token_);
    const pid_t pid = job_->pid(0);
    ResetPeak(pid);
    const int64_t before = ProcStatusBytes(pid, "VmHWM");
    RawReply reply = raw.Unary(method, request, kAnswered);
    *peak_growth = ProcStatusBytes(pid, "VmHWM") - before;
    std::cout << method << " of " << request.size()
              << " bytes: " << reply.status.error_code() << " in "
              << absl::ToInt64Milliseconds(reply.elapsed) << " ms, peak RSS +"
              << *peak_growth / kMiB << " MiB: " << reply.status.error_message()
              << "\n";
    return reply;
  }

  static DaemonCluster* job_;
  static std::string* token_;
};

DaemonCluster* HostileRequestsTest::job_ = nullptr;
std::string* HostileRequestsTest::token_ = nullptr;

constexpr char kRenewLease[] = "/ferry.proto.RRefs/RenewLease";

// `n` empty RRefHandles in LeaseRequest.forks (field 2): 2 bytes each.
std::string EmptyForks(int64_t n) {
  std::string out;
  out.reserve(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) out.append("\x12\x00", 2);
  return out;
}

// Before: 20 MiB of them grew the worker by 901 MiB before the request was
// refused (PERMISSION_DENIED: the holder is nobody's).
TEST_F(HostileRequestsTest, TwentyMegabytesOfEmptyForks) {
  const int64_t sent = 20 * kMiB;
  int64_t growth = 0;
  RawReply r = SendMeasured(kRenewLease, EmptyForks(sent / 2), &growth);
  EXPECT_THAT(ToAbsl(r.status),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("RRefs/RenewLease"), HasSubstr("forks"),
                             HasSubstr("(--max_items=1048576)"))));
  // gRPC holds the message (and may have held it twice while receiving);
  // nothing is built from it.
  EXPECT_LE(growth, 3 * sent);
  RawClient raw(job_->address(0), *token_);
  ASSERT_OK(raw.Register());
  ExpectServes(*job_, 0, raw);
}

// Fewer than --max_items, but each 2 bytes building a ~100-byte message:
// refused by what the parse would build, before it is built.
TEST_F(HostileRequestsTest, AMillionEmptyForks) {
  const int64_t n = int64_t{1} << 20;
  int64_t growth = 0;
  RawReply r = SendMeasured(kRenewLease, EmptyForks(n - 1), &growth);
  EXPECT_THAT(ToAbsl(r.status), StatusIs(absl::StatusCode::kResourceExhausted,
                                         AllOf(HasSubstr("RRefs/RenewLease"),
                                               HasSubstr("forks"))));
  EXPECT_LE(growth, 8 * 2 * n);
}

// A call's trace context (CallRequest.trace_context, issue 29) of any size
// or shape is no trace context, never a reason to refuse the call or to
// hold its bytes: 20 MiB of it, a thousand repeats, a well-formed one with
// zero ids. Each call is answered; the worker holds no more than gRPC's
// copies of the message.
TEST_F(HostileRequestsTest, ATraceContextOfAnySizeOrShapeIsOnlyIgnored) {
  RawClient raw(job_->address(0), *token_);
  ASSERT_OK(raw.Register());
  const std::string echo =
      wire::CallRequest("echo", {wire::Int(42)}, raw.node());
  std::string zero_ids(29, '\0');
  zero_ids[18] = 1;
  zero_ids[27] = 2;
  std::string repeats;
  for (int i = 0; i < 1000; ++i) repeats += wire::Bytes(6, zero_ids);
  const int64_t big = 20 * kMiB;
  for (const std::string& trace :
       {wire::Bytes(6, std::string(static_cast<size_t>(big), 'x')), repeats,
        wire::Bytes(6, zero_ids), wire::Bytes(6, zero_ids.substr(0, 28))}) {
    const pid_t pid = job_->pid(0);
    ResetPeak(pid);
    const int64_t before = ProcStatusBytes(pid, "VmHWM");
    RawReply r = raw.Unary(kCallMethod, echo + trace, kAnswered);
    const int64_t growth = ProcStatusBytes(pid, "VmHWM") - before;
    ASSERT_TRUE(r.status.ok())
        << trace.size() << " bytes: " << r.status.error_message();
    absl::StatusOr<proto::Value> v = testing::ParseResult(r.bytes);
    ASSERT_OK(v);
    EXPECT_EQ(v->int_value(), 42);
    EXPECT_LE(growth, 3 * static_cast<int64_t>(trace.size()) + 16 * kMiB)
        << trace.size() << " bytes of trace context";
  }
  ExpectServes(*job_, 0, raw);
}

// Every method of every service a worker serves (the master's Rendezvous
// on worker0, the directory's on worker1) parses its request within
// --max_items: a flood of unknown fields, which protobuf would keep one
// allocation each, is refused naming the method. (Worker/Call and
// CallStream/Call read raw bytes with their own limit-checked reader:
// hostile_calls_test.cc.)
TEST(HostileServicesTest, EveryMethodParsesWithinTheLimits) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(2, {"--max_items=1000"});
  ASSERT_OK(job);
  absl::StatusOr<std::string> token =
      ReadSecretFile((*job)->token_file(), "--token_file");
  ASSERT_OK(token);
  const std::string key(absl::StripAsciiWhitespace(*token));
  std::string flood;
  for (int i = 0; i < 1001; ++i) flood += std::string("\xc0\x3e\x00", 3);
  int methods = 0;
  for (int rank = 0; rank < 2; ++rank) {
    RawClient raw((*job)->address(rank), key);
    for (const google::protobuf::FileDescriptor* file :
         {proto::CallRequest::descriptor()->file(),
          proto::ForkRequest::descriptor()->file(),
          proto::JoinRequest::descriptor()->file()}) {
      const google::protobuf::ServiceDescriptor* service = file->service(0);
      for (int m = 0; m < service->method_count(); ++m) {
        const std::string name =
            absl::StrCat(service->name(), "/", service->method(m)->name());
        if (name == "Worker/Call") continue;
        RawReply r = raw.Unary(absl::StrCat("/", service->full_name(), "/",
                                            service->method(m)->name()),
                               flood, kAnswered);
        EXPECT_THAT(
            ToAbsl(r.status),
            StatusIs(absl::StatusCode::kResourceExhausted,
                     AllOf(HasSubstr(absl::StrCat("worker", rank, ": ", name)),
                           HasSubstr("(--max_items=1000)"))))
            << name;
        ++methods;
      }
    }
    ASSERT_OK(raw.Register());
    ExpectServes(**job, rank, raw);
  }
  EXPECT_EQ(methods, 2 * 13);
}

}  // namespace
}  // namespace ferry
