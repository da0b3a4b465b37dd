// The standing stream (collectives/transport/standing_stream.h) as a hostile or
// careless peer drives it with raw frames: every message is answered, in
// order, with what a message's own stream would have ended with, and the
// stream goes on serving the next one. In a job with a token, only a worker
// may open one, and each frame must come from the worker the stream's
// credential names.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/collectives.pb.h"
#include "rpc/auth/security.h"
#include "rpc/wire/grpc_status.h"
#include "tests/testing/raw_exchange.h"
#include "tests/testing/secret_files.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::DataHeader;
using ::ferry::testing::FrameBytes;
using ::ferry::testing::kStandingMethod;
using ::ferry::testing::RawExchangeStream;
using ::ferry::testing::ValueBytes;
using ::testing::HasSubstr;

constexpr absl::Duration kBound = absl::Seconds(20);

// An ack's status (an empty ack: delivered).
absl::Status AckStatus(const std::string& bytes) {
  if (bytes.empty()) return absl::OkStatus();
  proto::StandingAck ack;
  if (!ack.ParseFromString(bytes)) return absl::UnknownError("not an ack");
  return absl::Status(static_cast<absl::StatusCode>(ack.code()), ack.error());
}

// Writes `frame` and reads its ack.
absl::Status Exchange(RawExchangeStream& stream, const std::string& frame) {
  if (!stream.Write(frame)) return absl::UnknownError("write failed");
  std::string ack;
  if (!stream.Read(&ack)) return absl::UnknownError("no ack");
  return AckStatus(ack);
}

std::string Message(const std::string& op, int step, int src) {
  const std::string payload = ValueBytes(Value(int64_t{7}));
  return FrameBytes(
      DataHeader(op, step, src, static_cast<int64_t>(payload.size())), payload);
}

TEST(StandingStreamTest, EveryMessageIsAnsweredInOrderAndTheStreamGoesOn) {
  LocalJob::Options options;
  options.configure = [](WorkerConfig& o) {
    o.limits.max_mailbox_bytes = 1 << 20;
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(2, options));
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      job->worker(1).rpc().address(), grpc::InsecureChannelCredentials());
  std::unique_ptr<RawExchangeStream> stream =
      RawExchangeStream::Open(channel, kBound, "", kStandingMethod);
  // Delivered: held for an op not begun here.
  EXPECT_OK(Exchange(*stream, Message("world/t:kept", 0, 0)));
  // A message of more than one frame: the first 8 bytes of a well-formed
  // value of 1 KiB (its structure whole so far, its string cut).
  const std::string two = ValueBytes(Value(Bytes{std::string(1024, 'x')}));
  EXPECT_THAT(
      Exchange(*stream, FrameBytes(DataHeader("world/t:two", 0, 0,
                                              static_cast<int64_t>(two.size())),
                                   two.substr(0, 8))),
      ::ferry::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("must be one frame")));
  // From the receiver itself, and over --max_mailbox_mb.
  EXPECT_THAT(Exchange(*stream, Message("world/t:self", 0, 1)),
              ::ferry::testing::StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(
      Exchange(
          *stream,
          FrameBytes(DataHeader("world/t:huge", 0, 0, int64_t{2} << 20), "x")),
      ::ferry::testing::StatusIs(absl::StatusCode::kResourceExhausted,
                                 HasSubstr("max_mailbox_mb")));
  // A garbled frame.
  EXPECT_THAT(Exchange(*stream, std::string("\xff\xff\xff\xff", 4)),
              ::ferry::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  // Still serving: a second message is delivered too.
  EXPECT_OK(Exchange(*stream, Message("world/t:kept", 1, 0)));
  EXPECT_EQ(job->worker(1).collectives().mailbox().held_messages(), 2);
  EXPECT_OK(FromGrpcStatus(stream->Finish()));
  // What was refused left nothing behind.
  job->worker(1)
      .collectives()
      .mailbox()
      .Abort("world/t:kept", absl::CancelledError("test over"))
      .IgnoreError();
  EXPECT_EQ(job->worker(1).collectives().mailbox().held_bytes(), 0);
}

TEST(StandingStreamTest, OnlyWorkersUnderTheirOwnRank) {
  const std::string token_file = ::ferry::testing::PrivateCopy(absl::StrCat(
      std::getenv("TEST_SRCDIR"), "/ferry/tests/testdata/tls/token.txt"));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const Security> security,
                       Security::Load({.token_file = token_file}));
  ASSERT_OK_AND_ASSIGN(std::string token,
                       ReadSecretFile(token_file, "--token_file"));
  token = std::string(absl::StripAsciiWhitespace(token));
  LocalJob::Options options;
  options.configure = [&](WorkerConfig& o) { o.security = security; };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(3, options));
  // The token alone (a client, or anyone who read it) opens none.
  std::shared_ptr<grpc::Channel> anonymous = grpc::CreateChannel(
      job->worker(2).rpc().address(), grpc::InsecureChannelCredentials());
  std::unique_ptr<RawExchangeStream> stream =
      RawExchangeStream::Open(anonymous, kBound, token, kStandingMethod);
  stream->Write(Message("world/t:anon", 0, 0));
  grpc::Status refused = stream->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("come only from workers"));
  // Worker 0's stream (its channel carries its credential) may not speak
  // for rank 1.
  RpcAgent& worker0 = job->worker(0).rpc();
  stream = RawExchangeStream::Open(
      worker0.channels().ForWorker(worker0.directory().at(2)), kBound, "",
      kStandingMethod);
  EXPECT_THAT(Exchange(*stream, Message("world/t:forged", 0, 1)),
              ::ferry::testing::StatusIs(
                  absl::StatusCode::kPermissionDenied,
                  HasSubstr("the frame claims src rank 1 but the stream's "
                            "credential is worker0")));
  EXPECT_OK(Exchange(*stream, Message("world/t:honest", 0, 0)));
  EXPECT_OK(FromGrpcStatus(stream->Finish()));
  EXPECT_EQ(job->worker(2).collectives().mailbox().held_messages(), 1);
}

}  // namespace
}  // namespace ferry
