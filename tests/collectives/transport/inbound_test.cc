// The receiving end of the collectives transport against hostile frame
// sequences: each is refused with a specific code, and leaves nothing held.
#include "collectives/transport/inbound.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "collectives/transport/frames.h"
#include "collectives/transport/mailbox.h"
#include "collectives/transport/op_key.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/base/limits.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/raw_exchange.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::AbortHeader;
using ::ferry::testing::DataHeader;
using ::ferry::testing::FrameBytes;
using ::ferry::testing::ManualClock;
using ::ferry::testing::StatusIs;
using ::ferry::testing::ToByteBuffer;
using ::ferry::testing::ValueBytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kSelf = 0;
constexpr int kWorld = 4;
constexpr int64_t kTtlMs = 5000;

class InboundTest : public ::testing::Test {
 protected:
  InboundTest() : box_(Bounds(), &clock_) {}

  static Limits Bounds() {
    Limits limits;
    limits.max_mailbox_bytes = 1 << 20;
    limits.mailbox_ttl_ms = kTtlMs;
    return limits;
  }

  std::unique_ptr<Inbound> NewInbound() {
    return std::make_unique<Inbound>(
        &box_, InboundOptions{kSelf, kWorld, kTtlMs, &clock_});
  }

  // Feeds `frames` to a new Inbound; the first error, else the last Next.
  absl::StatusOr<Inbound::Next> Feed(const std::vector<std::string>& frames) {
    std::unique_ptr<Inbound> in = NewInbound();
    absl::StatusOr<Inbound::Next> next = Inbound::Next::kMore;
    for (const std::string& f : frames) {
      next = in->Take(ToByteBuffer(f));
      if (!next.ok()) return next;
    }
    return next;
  }

  ManualClock clock_;
  Mailbox box_;
};

TEST_F(InboundTest, AWholeMessageIsDeliveredTheMomentItIsIn) {
  const std::string payload = ValueBytes(Value("hello, rank 0"));
  const int64_t total = static_cast<int64_t>(payload.size());
  std::unique_ptr<Inbound> in = NewInbound();
  ASSERT_OK_AND_ASSIGN(
      Inbound::Next next,
      in->Take(ToByteBuffer(FrameBytes(DataHeader("world/1", 0, 1, total),
                                       payload.substr(0, 3)))));
  EXPECT_EQ(next, Inbound::Next::kMore);
  ASSERT_OK_AND_ASSIGN(next, in->Take(ToByteBuffer(FrameBytes(
                                 proto::ChunkHeader(), payload.substr(3)))));
  EXPECT_EQ(next, Inbound::Next::kDone);
  EXPECT_OK(in->End());
  EXPECT_EQ(box_.Receive({"world/1", 0, 1}).Wait(absl::ZeroDuration()).value(),
            Value("hello, rank 0"));
  in.reset();
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, MakeFramesRoundTrips) {
  const std::string payload = ValueBytes(Value(std::string(5000, 'x')));
  proto::ChunkHeader h;
  h.set_op("world/3");
  h.set_step(1);
  h.set_src(2);
  std::vector<grpc::ByteBuffer> frames =
      MakeFrames(h, ToByteBuffer(payload), /*chunk=*/1024);
  ASSERT_EQ(frames.size(), 5u);
  std::unique_ptr<Inbound> in = NewInbound();
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(Inbound::Next next, in->Take(frames[i]));
    EXPECT_EQ(next, i + 1 == frames.size() ? Inbound::Next::kDone
                                           : Inbound::Next::kMore);
  }
  EXPECT_EQ(box_.Receive({"world/3", 1, 2}).Wait(absl::ZeroDuration()).value(),
            Value(std::string(5000, 'x')));
}

// A tensor the receiver asked for with a landing is written there, once:
// the delivered tensor references the landing's bytes.
TEST_F(InboundTest, AnAwaitedTensorIsReceivedIntoItsLanding) {
  const Tensor block = Tensor::FromVector<float>({1, 2, 3, 4});
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kFloat32, {8}));
  const TensorLanding at = TensorLanding::Within(out, 4, 8);
  Future<Value> got = box_.Receive({"world/5", 0, 1}, at);
  const std::string payload = ValueBytes(
      Value(Value::List{Value(Bytes{"h"}), Value(Value::List{Value(block)})}));
  const int64_t total = static_cast<int64_t>(payload.size());
  // Cut in two frames, the tensor's bytes across both.
  const size_t cut = payload.size() - 6;
  ASSERT_OK_AND_ASSIGN(
      Inbound::Next next,
      Feed({FrameBytes(DataHeader("world/5", 0, 1, total),
                       payload.substr(0, cut)),
            FrameBytes(proto::ChunkHeader(), payload.substr(cut))}));
  EXPECT_EQ(next, Inbound::Next::kDone);
  ASSERT_OK_AND_ASSIGN(Value message, got.Wait(absl::ZeroDuration()));
  const Tensor& t = message.as_list()[1].as_list()[0].as_tensor();
  EXPECT_TRUE(at.Holds(t));
  EXPECT_EQ(t, block);
  EXPECT_EQ(std::memcmp(out.data() + 16, block.data(), 16), 0);
  // Handed out once: the landing is gone from the mailbox.
  EXPECT_FALSE(box_.TakeLanding({"world/5", 0, 1}).has_value());
}

// A landing of another size, or one offered after the message came, is
// not used: the tensor gets a buffer of its own, as without one.
TEST_F(InboundTest, ATensorLandsOnlyIfAwaitedAndOfTheLandingsSize) {
  const Tensor block = Tensor::FromVector<int32_t>({7, 8, 9});
  const std::string payload = ValueBytes(Value(block));
  const int64_t total = static_cast<int64_t>(payload.size());
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kInt32, {8}));
  const TensorLanding small = TensorLanding::Within(out, 0, 2);
  Future<Value> got = box_.Receive({"world/6", 0, 1}, small);
  ASSERT_OK_AND_ASSIGN(
      Inbound::Next next,
      Feed({FrameBytes(DataHeader("world/6", 0, 1, total), payload)}));
  EXPECT_EQ(next, Inbound::Next::kDone);
  ASSERT_OK_AND_ASSIGN(Value message, got.Wait(absl::ZeroDuration()));
  EXPECT_FALSE(small.Holds(message.as_tensor()));
  EXPECT_EQ(message.as_tensor(), block);

  ASSERT_OK_AND_ASSIGN(
      next, Feed({FrameBytes(DataHeader("world/6", 1, 1, total), payload)}));
  EXPECT_EQ(next, Inbound::Next::kDone);
  const TensorLanding late = TensorLanding::Within(out, 0, 3);
  ASSERT_OK_AND_ASSIGN(
      message,
      box_.Receive({"world/6", 1, 1}, late).Wait(absl::ZeroDuration()));
  EXPECT_FALSE(late.Holds(message.as_tensor()));
  EXPECT_EQ(message.as_tensor(), block);
}

// A landing offered after the message's first frame came (a peer that
// started first) still gets the tensor, copied there once it is whole.
TEST_F(InboundTest, ALandingOfferedMidMessageStillGetsTheTensor) {
  const Tensor block = Tensor::FromVector<int64_t>({5, 6, 7, 8});
  const std::string payload = ValueBytes(
      Value(Value::List{Value(Bytes{"h"}), Value(Value::List{Value(block)})}));
  const int64_t total = static_cast<int64_t>(payload.size());
  std::unique_ptr<Inbound> in = NewInbound();
  ASSERT_OK_AND_ASSIGN(
      Inbound::Next next,
      in->Take(ToByteBuffer(FrameBytes(DataHeader("world/8", 0, 1, total),
                                       payload.substr(0, 10)))));
  EXPECT_EQ(next, Inbound::Next::kMore);
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kInt64, {4}));
  const TensorLanding at = TensorLanding::Within(out, 0, 4);
  Future<Value> got = box_.Receive({"world/8", 0, 1}, at);
  ASSERT_OK_AND_ASSIGN(next, in->Take(ToByteBuffer(FrameBytes(
                                 proto::ChunkHeader(), payload.substr(10)))));
  EXPECT_EQ(next, Inbound::Next::kDone);
  ASSERT_OK_AND_ASSIGN(Value message, got.Wait(absl::ZeroDuration()));
  const Tensor& t = message.as_list()[1].as_list()[0].as_tensor();
  EXPECT_TRUE(at.Holds(t));
  EXPECT_EQ(t, block);
}

// A message whose first tensor is not where its first frame said (two
// tensor fields in one value: protobuf keeps the last) is refused, and
// leaves nothing behind.
TEST_F(InboundTest, ATensorNotWhereItsPrefixSaidIsRefused) {
  proto::Tensor a, b;
  a.set_dtype(proto::UINT8);
  a.add_shape(4);
  a.set_data("aaaa");
  b.set_data("bbbb");  // Merged: a's dtype and shape, b's bytes.
  const std::string payload =
      absl::StrCat("\x32", std::string(1, static_cast<char>(a.ByteSizeLong())),
                   a.SerializeAsString(), "\x32",
                   std::string(1, static_cast<char>(b.ByteSizeLong())),
                   b.SerializeAsString());
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kUInt8, {4}));
  Future<Value> got =
      box_.Receive({"world/9", 0, 1}, TensorLanding::Within(out, 0, 4));
  const int64_t total = static_cast<int64_t>(payload.size());
  EXPECT_THAT(Feed({FrameBytes(DataHeader("world/9", 0, 1, total), payload)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not where its prefix put it")));
  EXPECT_FALSE(got.IsReady());
  EXPECT_EQ(box_.held_bytes(), 0);
}

// Issue 25, F1: a first frame whose tensor field ends inside its own data
// field, for an op awaiting a 64 KiB tensor. Before, the data's length was
// read past the tensor's end, its place taken as inside the message, and
// ~64 KiB of the sender's bytes copied past an 11-byte buffer (a heap
// overflow). Now the frame is refused, naming op, sender and field, and
// nothing is written anywhere.
TEST_F(InboundTest, ATensorEndingInsideItsOwnDataFieldIsRefused) {
  constexpr int64_t kLanding = 64 << 10;
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kUInt8, {kLanding}));
  std::memset(out.data(), 0, kLanding);
  Future<Value> got =
      box_.Receive({"world/10", 0, 1}, TensorLanding::Within(out, 0, kLanding));
  const std::string payload =
      ferry::testing::TensorPastItsEndPayload(kLanding, kLanding);
  const int64_t total = static_cast<int64_t>(payload.size());
  EXPECT_THAT(Feed({FrameBytes(DataHeader("world/10", 0, 1, total), payload)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("op world/10"), HasSubstr("rank 1"),
                             HasSubstr("message.tensor"))));
  EXPECT_FALSE(got.IsReady());
  EXPECT_EQ(box_.held_bytes(), 0);
  EXPECT_EQ(std::string(out.data(), kLanding), std::string(kLanding, '\0'));
  // The same with the tensor's length cut across two frames, and with a
  // length that would run past the message only.
  EXPECT_THAT(Feed({FrameBytes(DataHeader("world/10", 0, 1, total),
                               payload.substr(0, payload.size() - 2)),
                    FrameBytes(proto::ChunkHeader(),
                               payload.substr(payload.size() - 2))}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(box_.held_bytes(), 0);
  EXPECT_EQ(std::string(out.data(), kLanding), std::string(kLanding, '\0'));
}

// An aborted op lets go of the landings its receivers offered (they keep
// its output alive).
TEST_F(InboundTest, AnAbortDropsTheLandingsOffered) {
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kInt32, {8}));
  std::weak_ptr<void> buffer;
  {
    TensorLanding at = TensorLanding::Within(out, 0, 4);
    buffer = at.owner;
    (void)box_.Receive({"world/7", 0, 1}, std::move(at));
  }
  const long held = buffer.use_count();
  box_.Abort("world/7", absl::CancelledError("gone")).IgnoreError();
  EXPECT_EQ(buffer.use_count(), held - 1);
  EXPECT_FALSE(box_.TakeLanding({"world/7", 0, 1}).has_value());
}

// Before, `src` was taken as claimed.
TEST_F(InboundTest, ASenderOutsideTheOpsGroupIsRefused) {
  auto first = [](std::string op, int step, int src) {
    return std::vector<std::string>{
        FrameBytes(DataHeader(std::move(op), step, src, 1), "x")};
  };
  // Rank 2 is not in group [0, 1].
  EXPECT_THAT(Feed(first("g0,1#0/3", 0, 2)),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("not a member of its group")));
  // This worker (rank 0) is not in group [1, 2]: it never runs the op.
  EXPECT_THAT(Feed(first("c1,2/t:x", 0, 1)),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("rank 0 is not a member")));
  // Nobody sends to itself.
  EXPECT_THAT(Feed(first("world/1", 0, kSelf)),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("this worker itself")));
  EXPECT_THAT(Feed(first("world/1", 0, kWorld)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a rank of this job")));
  EXPECT_THAT(Feed(first("world/1", 0, -1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Feed(first("world/1", 1000, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step")));
  EXPECT_THAT(Feed(first("world/1", -1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step")));
  EXPECT_EQ(box_.held_bytes(), 0);
  EXPECT_EQ(box_.held_messages(), 0);
}

TEST_F(InboundTest, AFrameUnderAnotherRanksNameIsRefused) {
  // The stream's credential proved it comes from rank 2.
  Inbound in(&box_, InboundOptions{kSelf, kWorld, kTtlMs, &clock_, 2});
  EXPECT_THAT(
      in.Take(ToByteBuffer(FrameBytes(DataHeader("world/1", 0, 1, 1), "x"))),
      StatusIs(absl::StatusCode::kPermissionDenied,
               HasSubstr("the frame claims src rank 1 but the "
                         "stream's credential is worker2")));
  Inbound abort(&box_, InboundOptions{kSelf, kWorld, kTtlMs, &clock_, 2});
  EXPECT_THAT(
      abort.Take(ToByteBuffer(FrameBytes(
          AbortHeader("world/1", 3, absl::StatusCode::kInternal, "x"), ""))),
      StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(box_.held_bytes(), 0);
  // Its own rank passes.
  const std::string payload = ValueBytes(Value(int64_t{5}));
  Inbound honest(&box_, InboundOptions{kSelf, kWorld, kTtlMs, &clock_, 2});
  ASSERT_OK_AND_ASSIGN(
      Inbound::Next next,
      honest.Take(ToByteBuffer(FrameBytes(
          DataHeader("world/1", 0, 2, static_cast<int64_t>(payload.size())),
          payload))));
  EXPECT_EQ(next, Inbound::Next::kDone);
  EXPECT_OK(honest.End());
  EXPECT_EQ(box_.Receive({"world/1", 0, 2}).Wait(absl::ZeroDuration()).value(),
            Value(int64_t{5}));
}

TEST_F(InboundTest, MessagesForOpsNoWorkerRunsAreRefused) {
  for (const std::string& op : std::vector<std::string>{
           "", "world", "nonsense/1", "world/", "world/abc",
           "world/t:", "g0,1/1", "g0,x#0/1", "g0,0#0/1", "g0,9#0/1", "c/1",
           absl::StrCat("world/t:", std::string(kMaxOpTagBytes + 1, 't'))}) {
    EXPECT_THAT(Feed({FrameBytes(DataHeader(op, 0, 1, 1), "x")}),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << op;
  }
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, AnAbortIsOneFrameWithoutPayload) {
  // Before, an ABORT stream's later frames were buffered, uncounted.
  EXPECT_THAT(
      Feed({FrameBytes(
          AbortHeader("world/5", 1, absl::StatusCode::kInternal, "boom"),
          "payload")}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no payload")));
  proto::ChunkHeader with_total =
      AbortHeader("world/5", 1, absl::StatusCode::kInternal, "boom");
  with_total.set_total(1 << 30);
  EXPECT_THAT(Feed({FrameBytes(with_total, "")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(box_.AbortStatus("world/5"));  // Neither was applied.

  EXPECT_THAT(Feed({FrameBytes(AbortHeader("world/5", 1,
                                           absl::StatusCode::kInternal, "boom"),
                               ""),
                    FrameBytes(proto::ChunkHeader(), std::string(1000, 'x'))}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("after the message ended")));
  EXPECT_THAT(box_.AbortStatus("world/5"),
              StatusIs(absl::StatusCode::kInternal, "boom"));
  EXPECT_THAT(
      Feed({FrameBytes(AbortHeader("world/6", 1, absl::StatusCode::kInternal,
                                   std::string(5000, 'e')),
                       "")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("error of 5000 bytes")));
  // An abort from outside the group is refused like any frame.
  EXPECT_THAT(
      Feed({FrameBytes(
          AbortHeader("g0,1#0/1", 3, absl::StatusCode::kInternal, "x"), "")}),
      StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_OK(box_.AbortStatus("g0,1#0/1"));
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, AnOversizedMessageIsRefusedBeforeAnyByteIsHeld) {
  EXPECT_THAT(
      Feed({FrameBytes(DataHeader("world/1", 0, 1, int64_t{1} << 40), "x")}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("--max_mailbox_mb=1")));
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, NoFrameGoesPastTheAnnouncedTotal) {
  const std::string pay = ValueBytes(Value("abcdefgh"));
  const int64_t total = static_cast<int64_t>(pay.size());
  // More in the first frame than announced.
  EXPECT_THAT(Feed({FrameBytes(DataHeader("world/1", 0, 1, 2), pay)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("longer than its announced 2 bytes")));
  // More across frames.
  EXPECT_THAT(
      Feed({FrameBytes(DataHeader("world/1", 0, 2, total), pay.substr(0, 4)),
            FrameBytes(proto::ChunkHeader(), pay)}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("longer")));
  // Anything after the whole message, even empty, ends the stream.
  EXPECT_THAT(Feed({FrameBytes(DataHeader("world/1", 0, 3, total), pay),
                    FrameBytes(proto::ChunkHeader(), "")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("after the message ended")));
  EXPECT_EQ(box_.held_messages(), 1);  // The whole one was delivered.
  EXPECT_EQ(box_.held_bytes(), Mailbox::Charge({"world/1", 0, 3}, total));
}

// Before, frames without payload could follow each other forever, each
// growing the receiver's list of slices.
TEST_F(InboundTest, LaterFramesCarryPayloadAndNoHeaderOfTheirOwn) {
  std::vector<std::string> frames = {
      FrameBytes(DataHeader("world/1", 0, 1, 100), "")};
  for (int i = 0; i < 3; ++i)
    frames.push_back(FrameBytes(proto::ChunkHeader(), ""));
  EXPECT_THAT(Feed(frames), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("without payload")));
  EXPECT_THAT(Feed({FrameBytes(DataHeader("world/1", 0, 1, 100), "ab"),
                    FrameBytes(DataHeader("world/2", 0, 1, 0), "cd")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("header of its own")));
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, ACutShortMessageGivesBackItsBytes) {
  std::unique_ptr<Inbound> in = NewInbound();
  ASSERT_OK(in->Take(ToByteBuffer(
      FrameBytes(DataHeader("world/1", 0, 1, 1000), std::string(10, 'x')))));
  EXPECT_EQ(box_.held_bytes(), Mailbox::Charge({"world/1", 0, 1}, 1000));
  EXPECT_THAT(in->End(), StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("cut short: 10 of 1000")));
  EXPECT_EQ(box_.held_bytes(), 0);
  // A stream that breaks (no End) gives them back when it goes.
  in = NewInbound();
  ASSERT_OK(in->Take(ToByteBuffer(
      FrameBytes(DataHeader("world/1", 0, 2, 1000), std::string(10, 'x')))));
  in.reset();
  EXPECT_EQ(box_.held_bytes(), 0);
}

// Before, a message that never finished arriving held its admission (and
// what arrived) for as long as the sender kept the stream open.
TEST_F(InboundTest, AMessageNotWholeWithinTheTtlIsDropped) {
  std::unique_ptr<Inbound> in = NewInbound();
  ASSERT_OK(in->Take(ToByteBuffer(
      FrameBytes(DataHeader("world/1", 0, 1, 1000), std::string(10, 'x')))));
  clock_.Advance(absl::Milliseconds(kTtlMs - 1));
  EXPECT_FALSE(in->ExpireIfStale());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(in->ExpireIfStale());
  EXPECT_EQ(box_.held_bytes(), 0);
  EXPECT_THAT(in->Take(ToByteBuffer(
                  FrameBytes(proto::ChunkHeader(), std::string(10, 'x')))),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("(--mailbox_ttl_ms=5000)")));
  EXPECT_THAT(in->End(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  in.reset();
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, NoRoomIsBackpressure) {
  // Streams of two other senders hold most of the room, each within its
  // half.
  std::unique_ptr<Inbound> big1 = NewInbound();
  ASSERT_OK(big1->Take(ToByteBuffer(
      FrameBytes(DataHeader("world/1", 0, 1, (1 << 19) - 2000), "x"))));
  std::unique_ptr<Inbound> big3 = NewInbound();
  ASSERT_OK(big3->Take(ToByteBuffer(
      FrameBytes(DataHeader("world/1", 0, 3, (1 << 19) - 2000), "x"))));
  absl::StatusOr<Inbound::Next> refused =
      Feed({FrameBytes(DataHeader("world/1", 0, 2, 4000), "x")});
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("collective buffer full")));
  EXPECT_TRUE(IsBackpressure(refused.status()));
  big1.reset();
  big3.reset();
  EXPECT_EQ(box_.held_bytes(), 0);
}

// Issue 49: one sender's streams together hold at most half of
// --max_mailbox_mb; its next is backpressure, and another sender still
// gets in. (On 1dde932 one sender's streams could take it all.)
TEST_F(InboundTest, OneSendersStreamsHoldAtMostHalf) {
  std::unique_ptr<Inbound> first = NewInbound();
  ASSERT_OK(first->Take(ToByteBuffer(
      FrameBytes(DataHeader("world/1", 0, 1, (1 << 19) - 1000), "x"))));
  absl::StatusOr<Inbound::Next> second =
      Feed({FrameBytes(DataHeader("world/2", 0, 1, 2000), "x")});
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kResourceExhausted,
                               HasSubstr("half of --max_mailbox_mb")));
  EXPECT_TRUE(IsBackpressure(second.status()));
  // Another sender has room.
  const std::string pay = ValueBytes(Value("from rank 2"));
  ASSERT_OK_AND_ASSIGN(
      Inbound::Next next,
      Feed({FrameBytes(
          DataHeader("world/2", 0, 2, static_cast<int64_t>(pay.size())),
          pay)}));
  EXPECT_EQ(next, Inbound::Next::kDone);
  EXPECT_EQ(box_.Receive({"world/2", 0, 2}).Wait(absl::ZeroDuration()).value(),
            Value("from rank 2"));
  first.reset();
  EXPECT_EQ(box_.held_bytes(), 0);
}

TEST_F(InboundTest, MalformedFramesAreRefused) {
  EXPECT_THAT(Feed({""}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Feed({"\xff\xff\xff\xff\xff"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame's head length")));
  // A header length past the bound, with the bytes to back it.
  std::string huge = "\x80\x80\x08";  // 128 KiB.
  huge += std::string(128 << 10, 'x');
  EXPECT_THAT(
      Feed({huge}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("a frame head of 131072 bytes (at most 65536)")));
  EXPECT_THAT(Feed({"\x05\x01"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a length past the end of its field")));
  EXPECT_THAT(Feed({"\x02\xff\xff"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unparsable header")));
  // A whole message whose payload is no Value.
  EXPECT_THAT(
      Feed({FrameBytes(DataHeader("world/1", 0, 1, 3), "\xff\xff\xff")}),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(box_.held_bytes(), 0);
}

}  // namespace
}  // namespace ferry
