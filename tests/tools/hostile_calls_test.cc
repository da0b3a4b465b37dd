// A hostile client against real ferryd daemons: hand-built Call messages
// that once crashed, stalled or bloated a worker (issue 11), sent with a
// raw gRPC client. After each one the worker must be alive, have answered
// with the specific code (naming the flag when a limit was hit), be idle
// again (no call in flight), hold about the heap it held before, and
// still serve an honest call. Peers on the worker's local socket may name
// memory files for their messages (rpc/shm_message.h): files that are not
// theirs, not memory files or too short are refused the same way.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/call_stream.pb.h"
#include "proto/worker.pb.h"
#include "rpc/shm_message.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::kCallMethod;
using ::ferry::testing::kCallStreamMethod;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr int kFloat32 = 9;  // proto/value.proto's DType numbers.
constexpr int64_t kMiB = int64_t{1} << 20;
// A worker's heap may differ this much from before a case once it is
// idle again (allocator and gRPC caches), never by what a case sent.
constexpr int64_t kHeapSlack = 48 * kMiB;
// A hostile call is answered long before this; it only tells a hang.
constexpr absl::Duration kAnswered = absl::Seconds(5);

class HostileCallsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
        DaemonCluster::Up(1, {"--max_inflight_per_peer=8"});
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = job->release();
  }
  static void TearDownTestSuite() {
    delete job_;
    job_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(job_, nullptr);
    raw_ = std::make_unique<RawClient>(job_->address(0), job_->token());
    // A client of the job: the token lets it join, the credential it is
    // issued says who it is.
    absl::StatusOr<uint64_t> node = raw_->Register();
    ASSERT_TRUE(node.ok()) << node.status();
    absl::StatusOr<proto::WorkerStatus> s = raw_->Status();
    ASSERT_TRUE(s.ok()) << s.status();
    heap_before_ = s->heap_bytes();
  }

  // A CallRequest from this test's client.
  std::string Request(absl::string_view function,
                      const std::vector<std::string>& args) const {
    return wire::CallRequest(function, args, raw_->node());
  }

  // The checks after every case.
  void ExpectHealthy(const RawReply& reply, grpc::StatusCode code,
                     const std::string& text) {
    EXPECT_EQ(reply.status.error_code(), code) << reply.status.error_message();
    EXPECT_THAT(reply.status.error_message(), HasSubstr(text));
    EXPECT_LT(reply.elapsed, kAnswered);
    std::cout << ::testing::UnitTest::GetInstance()->current_test_info()->name()
              << ": " << reply.status.error_code() << " in "
              << absl::ToInt64Milliseconds(reply.elapsed)
              << " ms: " << reply.status.error_message().substr(0, 200) << "\n";
    ExpectIdleAndSmall();
    EXPECT_EQ(kill(job_->pid(0), 0), 0) << "worker0 died";
    RawReply honest =
        raw_->Unary(kCallMethod, Request("echo", {wire::Int(42)}));
    ASSERT_TRUE(honest.status.ok()) << honest.status.error_message();
    absl::StatusOr<proto::Value> v = testing::ParseResult(honest.bytes);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->int_value(), 42);
  }

  // No call in flight and the heap back near where it was; both are
  // polled (bounded) since a call's memory goes when gRPC is done with it
  // (on a loaded machine, once a CI run saw 54 MB still held 10 s after a
  // refused 200 MB request: the bound is 30 s).
  void ExpectIdleAndSmall() {
    absl::StatusOr<proto::WorkerStatus> s;
    AwaitTrue(
        [&] {
          s = raw_->Status();
          return !s.ok() || (s->inflight_incoming() == 0 &&
                             s->heap_bytes() <= heap_before_ + kHeapSlack);
        },
        absl::Seconds(30), /*every=*/absl::Milliseconds(20));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->inflight_incoming(), 0);
    EXPECT_EQ(s->inflight(), 0);
    EXPECT_LE(s->heap_bytes(), heap_before_ + kHeapSlack)
        << "heap before " << heap_before_;
  }

  static DaemonCluster* job_;
  std::unique_ptr<RawClient> raw_;
  int64_t heap_before_ = 0;
};

DaemonCluster* HostileCallsTest::job_ = nullptr;

// A call stream's only frame: `head`, naming a memory file.
std::string FileFrame(const proto::StreamHead& head) {
  const std::string bytes = head.SerializeAsString();
  return std::string(1, static_cast<char>(bytes.size())) + bytes;
}

TEST_F(HostileCallsTest, MemoryFilesAPeerNames) {
  // A client on the worker's unix-abstract socket, named in the directory.
  ASSERT_EQ(raw_->workers().size(), 1u);
  const proto::WorkerInfo& worker = raw_->workers()[0];
  ASSERT_FALSE(worker.local_address().empty());
  RawClient near(worker.local_address(), job_->token());
  ASSERT_TRUE(near.Register().ok());
  near.set_credential(near.CredentialFor(worker));
  const std::string data(size_t{3} << 20, '\x02');
  const std::string request = wire::CallRequest(
      "echo", {wire::Tensor(kFloat32, {int64_t{3} << 18}, data)}, near.node());
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  grpc::Slice slice(request.data(), request.size());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef at,
                       file.Write(grpc::ByteBuffer(&slice, 1), 0));
  ASSERT_OK_AND_ASSIGN(ShmFile reply_file, ShmFile::Create());
  proto::StreamHead honest;
  honest.set_total(request.size());
  *honest.mutable_shm() = at;
  *honest.mutable_reply_to() = reply_file.ref();

  // Honest: ferryd, another process, reads the request from this one's
  // file and writes its reply into the file offered.
  RawReply r = near.Stream(kCallStreamMethod, {FileFrame(honest)});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.messages.size(), 1u);
  proto::StreamHead back;
  ASSERT_TRUE(back.ParseFromString(r.messages[0].substr(1)));
  ASSERT_TRUE(back.has_shm());
  std::string reply(back.total(), '\0');
  ASSERT_OK(reply_file.Read(back.shm(), back.total(), reply.data()));
  absl::StatusOr<proto::Value> v = testing::ParseResult(reply);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->tensor().data(), data);

  // Someone else's file: the right descriptor, a guessed token.
  proto::StreamHead guessed = honest;
  guessed.mutable_shm()->set_token(std::string(16, '\x07'));
  ExpectHealthy(near.Stream(kCallStreamMethod, {FileFrame(guessed)}),
                grpc::StatusCode::INVALID_ARGUMENT,
                "is not the file its token names");
  // A device instead of a memory file: never opened for real.
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  proto::StreamHead device = honest;
  device.mutable_shm()->set_fd(null);
  ExpectHealthy(near.Stream(kCallStreamMethod, {FileFrame(device)}),
                grpc::StatusCode::INVALID_ARGUMENT, "is not a memory file");
  close(null);
  // A file shorter than the message it is said to hold.
  proto::StreamHead longer = honest;
  longer.set_total(request.size() + 100);
  ExpectHealthy(near.Stream(kCallStreamMethod, {FileFrame(longer)}),
                grpc::StatusCode::INVALID_ARGUMENT, "less than the message's");
  // A process that is gone.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  proto::StreamHead gone = honest;
  gone.mutable_shm()->set_pid(static_cast<uint32_t>(child));
  ExpectHealthy(near.Stream(kCallStreamMethod, {FileFrame(gone)}),
                grpc::StatusCode::FAILED_PRECONDITION, "cannot be opened here");
  // Over TCP, no file is taken at all, however right it is.
  ExpectHealthy(raw_->Stream(kCallStreamMethod, {FileFrame(honest)}),
                grpc::StatusCode::INVALID_ARGUMENT, "where none is taken");
}

// `unit` repeated to `bytes` bytes (a multiple of its size), by doubling.
std::string Repeat(std::string unit, int64_t bytes) {
  while (static_cast<int64_t>(unit.size()) * 2 <= bytes) unit += unit;
  while (static_cast<int64_t>(unit.size()) < bytes) {
    unit += unit.substr(0, bytes - unit.size());
  }
  return unit;
}

proto::RRefHandle Handle(int owner_rank) {
  proto::RRefHandle h;
  h.set_rref_creator(0);
  h.set_rref_local(1);
  h.set_fork_creator(0);
  h.set_fork_local(2);
  h.set_owner("worker0");
  h.set_owner_rank(owner_rank);
  return h;
}

TEST_F(HostileCallsTest, RRefOwnerRankHuge) {
  RawReply r =
      raw_->Unary(kCallMethod, Request("echo", {wire::RRef(Handle(1 << 30))}));
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "args[0]: rref w0.1: owner rank 1073741824 is not a worker");
}

TEST_F(HostileCallsTest, RRefOwnerRankNegative) {
  RawReply r =
      raw_->Unary(kCallMethod, Request("echo", {wire::RRef(Handle(-5))}));
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "owner rank -5 is not a worker");
}

TEST_F(HostileCallsTest, ConcatOfHugeZeroSizeShape) {
  std::string t = wire::Tensor(kFloat32, {int64_t{1} << 62, 0}, "");
  RawReply r = raw_->Unary(kCallMethod,
                           Request("concat", {wire::List({t}), wire::Int(1)}));
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT, "--max_tensor_dim=");
}

TEST_F(HostileCallsTest, ZerosOfSixtyFourGiB) {
  RawReply r = raw_->Unary(
      kCallMethod, Request("zeros", {wire::List({wire::Int(17179869184)})}));
  // Refused by --max_alloc_mb before anything is allocated.
  ExpectHealthy(r, grpc::StatusCode::RESOURCE_EXHAUSTED, "(--max_alloc_mb=");
}

TEST_F(HostileCallsTest, TwoHundredMegabytesOfEmptyValues) {
  // 100 million empty arguments.
  std::string request =
      Request("echo", {}) + Repeat(std::string("\x12\x00", 2), 200 * kMiB);
  RawReply r = raw_->Unary(kCallMethod, request, absl::Seconds(30));
  request.clear();
  request.shrink_to_fit();
  ExpectHealthy(r, grpc::StatusCode::RESOURCE_EXHAUSTED, "(--max_args=4096)");
}

TEST_F(HostileCallsTest, OneListOfAHundredMillionEmptyValues) {
  std::string items = Repeat(std::string("\x0a\x00", 2), 200 * kMiB);
  std::string request = Request("echo", {wire::Bytes(7, items)});
  items.clear();
  items.shrink_to_fit();
  RawReply r = raw_->Unary(kCallMethod, request, absl::Seconds(30));
  ExpectHealthy(r, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "args[0]: more than 1048576 values in one message");
  EXPECT_THAT(r.status.error_message(), HasSubstr("(--max_items=1048576)"));
}

TEST_F(HostileCallsTest, TooManyArguments) {
  std::vector<std::string> args(5000, wire::Int(1));
  RawReply r = raw_->Unary(kCallMethod, Request("echo", args));
  ExpectHealthy(r, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "args: more than 4096 arguments");
}

TEST_F(HostileCallsTest, OverDeepValue) {
  std::string v = wire::Int(1);
  for (int i = 0; i < 100; ++i) v = wire::List({v});
  RawReply r = raw_->Unary(kCallMethod, Request("echo", {v}));
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "nesting deeper than 64 levels");
}

TEST_F(HostileCallsTest, FloodFromOnePeer) {
  // 40 calls at once from one caller; 8 may be in flight.
  std::vector<RawReply> replies =
      raw_->UnaryMany(kCallMethod, Request("sleep_ms", {wire::Int(500)}), 40,
                      absl::Seconds(10));
  int ok = 0, refused = 0;
  RawReply refusal;
  for (const RawReply& r : replies) {
    if (r.status.ok()) ++ok;
    if (r.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      refusal = r;
    }
  }
  EXPECT_LE(ok, 8);
  EXPECT_GT(ok, 0);
  EXPECT_EQ(ok + refused, 40);
  ExpectHealthy(refusal, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "over the limit of 8 calls (--max_inflight_per_peer=8)");
}

TEST_F(HostileCallsTest, CancelledSleep) {
  RawReply r = raw_->UnaryCancelledAfter(
      kCallMethod, Request("sleep_ms", {wire::Int(600000)}),
      absl::Milliseconds(200));
  ExpectHealthy(r, grpc::StatusCode::CANCELLED, "");
}

TEST_F(HostileCallsTest, SleepPastItsDeadline) {
  RawReply r =
      raw_->Unary(kCallMethod, Request("sleep_ms", {wire::Int(600000)}),
                  absl::Milliseconds(300));
  ExpectHealthy(r, grpc::StatusCode::DEADLINE_EXCEEDED, "");
}

TEST_F(HostileCallsTest, MessageOverTheSizeLimit) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> small =
      DaemonCluster::Up(1, {"--max_message_mb=1"});
  ASSERT_TRUE(small.ok()) << small.status();
  RawClient raw((*small)->address(0), (*small)->token());
  ASSERT_TRUE(raw.Register().ok());
  std::string request =
      wire::CallRequest("echo",
                        {wire::Tensor(kFloat32, {int64_t{1} << 19},
                                      std::string(size_t{2} << 20, '\0'))},
                        raw.node());
  RawReply r = raw.Unary(kCallMethod, request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), HasSubstr("larger than max"));
  EXPECT_LT(r.elapsed, kAnswered);
  std::cout << "MessageOverTheSizeLimit: " << r.status.error_code() << " in "
            << absl::ToInt64Milliseconds(r.elapsed)
            << " ms: " << r.status.error_message() << "\n";
  RawReply honest = raw.Unary(
      kCallMethod, wire::CallRequest("echo", {wire::Int(7)}, raw.node()));
  EXPECT_TRUE(honest.status.ok()) << honest.status.error_message();
  EXPECT_EQ(kill((*small)->pid(0), 0), 0);
}

TEST_F(HostileCallsTest, StreamAnnouncingAnExabyte) {
  RawReply r =
      raw_->Stream(kCallStreamMethod, {wire::StreamHead(uint64_t{1} << 60)});
  ExpectHealthy(r, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "(--max_message_mb=1100)");
}

TEST_F(HostileCallsTest, MalformedStreamHeads) {
  // A head length ('a', 97) past the frame's end.
  RawReply r = raw_->Stream(kCallStreamMethod, {"abc"});
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "request: a frame's head length");
  // A first frame without a head, and a head without the total.
  r = raw_->Stream(kCallStreamMethod, {wire::StreamChunk("abc")});
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "request: a first frame without a stream head");
  r = raw_->Stream(kCallStreamMethod, {std::string("\x02\x10\x05", 3)});
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "request: a stream head without the message's total");
}

TEST_F(HostileCallsTest, StreamLongerThanAnnounced) {
  RawReply r = raw_->Stream(
      kCallStreamMethod, {wire::StreamHead(4), wire::StreamChunk("12345678")});
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "a chunk of 8 bytes after 0 of 4");
}

TEST_F(HostileCallsTest, StreamEndingEarly) {
  RawReply r = raw_->Stream(kCallStreamMethod, {wire::StreamHead(1 << 20),
                                                wire::StreamChunk("1234")});
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT,
                "4 of 1048576 bytes received");
}

TEST_F(HostileCallsTest, StreamOfAMalformedRequest) {
  const std::string junk = "\xff\xff\xff";
  RawReply r = raw_->Stream(kCallStreamMethod, {wire::StreamHead(junk.size()),
                                                wire::StreamChunk(junk)});
  ExpectHealthy(r, grpc::StatusCode::INVALID_ARGUMENT, "request");
}

TEST_F(HostileCallsTest, StreamedEchoIsAnsweredAsAStream) {
  const std::string data(size_t{3} << 20, '\x01');
  const std::string request =
      Request("echo", {wire::Tensor(kFloat32, {int64_t{3} << 18}, data)});
  std::vector<std::string> messages = {wire::StreamHead(request.size())};
  for (size_t at = 0; at < request.size(); at += size_t{1} << 20) {
    messages.push_back(wire::StreamChunk(request.substr(at, size_t{1} << 20)));
  }
  RawReply r = raw_->Stream(kCallStreamMethod, messages);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // Frames (rpc/wire/frames.h): the first's head is a StreamHead, the
  // others have an empty head (the byte 0).
  ASSERT_GE(r.messages.size(), 2u);
  const size_t head = static_cast<unsigned char>(r.messages[0][0]);
  ASSERT_LT(head, 0x80u);  // A one-byte varint.
  proto::StreamHead stream_head;
  ASSERT_TRUE(stream_head.ParseFromString(r.messages[0].substr(1, head)));
  std::string reply = r.messages[0].substr(1 + head);
  for (size_t i = 1; i < r.messages.size(); ++i) {
    ASSERT_EQ(r.messages[i][0], '\0') << "frame " << i;
    reply += r.messages[i].substr(1);
  }
  EXPECT_EQ(stream_head.total(), reply.size());
  absl::StatusOr<proto::Value> v = testing::ParseResult(reply);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->tensor().data(), data);
}

TEST_F(HostileCallsTest, LimitsAreReported) {
  absl::StatusOr<proto::WorkerStatus> s = raw_->Status();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->limits().at("max_inflight_per_peer"), 8);
  EXPECT_EQ(s->limits().at("max_message_mb"), 1100);
  EXPECT_EQ(s->limits().at("max_args"), 4096);
}

}  // namespace
}  // namespace ferry
