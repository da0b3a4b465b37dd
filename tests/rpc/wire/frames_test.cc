// The one chunk framing: what SplitIntoFrames writes, ReadFrame reads back
// (heads typed, payload referenced, not copied), and ReadFrame refuses
// every frame no honest writer makes, naming the stream.
#include "rpc/wire/frames.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/call_stream.pb.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kMaxHead = 64;

// A byte buffer of one slice per string.
grpc::ByteBuffer Buffer(const std::vector<std::string>& parts) {
  std::vector<grpc::Slice> slices;
  for (const std::string& p : parts) slices.emplace_back(p.data(), p.size());
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Bytes(const std::vector<grpc::Slice>& slices) {
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  return Bytes(slices);
}

proto::StreamHead Head(uint64_t total, uint32_t align) {
  proto::StreamHead head;
  head.set_total(total);
  head.set_align(align);
  return head;
}

absl::StatusOr<WireFrame> Read(const grpc::ByteBuffer& frame,
                               proto::StreamHead* head) {
  return ReadFrame(frame, kMaxHead, "test stream", head);
}

TEST(FramesTest, OneFrameCarriesTheHeadAndThePayload) {
  std::vector<grpc::ByteBuffer> frames =
      SplitIntoFrames(Head(5, 64), Buffer({"hello"}), 1 << 20);
  ASSERT_EQ(frames.size(), 1u);
  // [varint n][head][payload], the head as protobuf serializes it.
  const std::string head_bytes = Head(5, 64).SerializeAsString();
  EXPECT_EQ(Bytes(frames[0]),
            std::string(1, static_cast<char>(head_bytes.size())) + head_bytes +
                "hello");
  proto::StreamHead head;
  ASSERT_OK_AND_ASSIGN(WireFrame frame, Read(frames[0], &head));
  EXPECT_EQ(head.total(), 5u);
  EXPECT_EQ(head.align(), 64u);
  EXPECT_EQ(frame.head_bytes, static_cast<int64_t>(head_bytes.size()));
  EXPECT_EQ(frame.payload_bytes, 5);
  EXPECT_EQ(Bytes(frame.payload), "hello");
}

// Payload slices of 500, 700 and 300 bytes in frames of at most 400
// payload bytes: four frames, the later ones with an empty head (which
// clears the caller's), their payload sub-slices of the sender's memory.
// (Slices this large are reference-counted; gRPC inlines, and so copies,
// slices of a few bytes.)
TEST(FramesTest, ALargePayloadIsCutIntoFramesWithoutACopy) {
  const std::string a(500, 'a'), b(700, 'b'), c(300, 'c');
  const grpc::ByteBuffer payload = Buffer({a, b, c});
  std::vector<grpc::Slice> sent;
  ASSERT_TRUE(payload.Dump(&sent).ok());
  std::vector<grpc::ByteBuffer> frames =
      SplitIntoFrames(Head(1500, 0), payload, 400);
  ASSERT_EQ(frames.size(), 4u);
  std::string received;
  for (size_t i = 0; i < frames.size(); ++i) {
    proto::StreamHead head = Head(99, 99);
    ASSERT_OK_AND_ASSIGN(WireFrame frame, Read(frames[i], &head));
    if (i == 0) {
      EXPECT_EQ(head.total(), 1500u);
      EXPECT_GT(frame.head_bytes, 0);
    } else {
      EXPECT_EQ(frame.head_bytes, 0);
      EXPECT_EQ(head.total(), 0u) << "frame " << i;  // Cleared.
    }
    EXPECT_LE(frame.payload_bytes, 400);
    for (const grpc::Slice& s : frame.payload) {
      bool within = false;
      for (const grpc::Slice& original : sent) {
        within |= s.begin() >= original.begin() && s.end() <= original.end();
      }
      EXPECT_TRUE(within) << "frame " << i << " copied its payload";
    }
    received += Bytes(frame.payload);
  }
  EXPECT_EQ(received, a + b + c);
}

TEST(FramesTest, AnEmptyPayloadIsOneFrameOfItsHead) {
  std::vector<grpc::ByteBuffer> frames =
      SplitIntoFrames(Head(0, 0), grpc::ByteBuffer(), 4);
  ASSERT_EQ(frames.size(), 1u);
  proto::StreamHead head;
  ASSERT_OK_AND_ASSIGN(WireFrame frame, Read(frames[0], &head));
  EXPECT_EQ(frame.payload_bytes, 0);
  EXPECT_TRUE(frame.payload.empty());
}

// gRPC may hand a frame over in slices of any size: a head split byte by
// byte reads the same.
TEST(FramesTest, AHeadSplitAcrossSlicesIsRead) {
  const std::string whole =
      Bytes(SplitIntoFrames(Head(3, 8), Buffer({"abc"}), 16)[0]);
  std::vector<std::string> bytes;
  for (char c : whole) bytes.emplace_back(1, c);
  proto::StreamHead head;
  ASSERT_OK_AND_ASSIGN(WireFrame frame, Read(Buffer(bytes), &head));
  EXPECT_EQ(head.total(), 3u);
  EXPECT_EQ(head.align(), 8u);
  EXPECT_EQ(Bytes(frame.payload), "abc");
}

TEST(FramesTest, MalformedFramesAreRefusedNamingTheStream) {
  proto::StreamHead head;
  EXPECT_THAT(Read(grpc::ByteBuffer(), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test stream: an empty frame")));
  EXPECT_THAT(Read(Buffer({""}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("an empty frame")));
  // A varint that never ends, and one longer than ten bytes.
  EXPECT_THAT(Read(Buffer({"\xff\xff"}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test stream: a frame's head length")));
  EXPECT_THAT(Read(Buffer({std::string(11, '\xff') + '\x01'}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame's head length")));
  // A length past the frame's bytes (about 2^63: no wrap-around).
  EXPECT_THAT(Read(Buffer({std::string(8, '\xff') + "\x7f" + "xy"}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame's head length")));
  EXPECT_THAT(Read(Buffer({"\x05\x08\x01"}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame's head length")));
  // Over the bound, with the bytes to back it.
  EXPECT_THAT(Read(Buffer({"\x41" + std::string(65, '\0')}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame head of 65 bytes (at most 64)")));
  // A head that is no StreamHead (field 1 cut short).
  EXPECT_THAT(Read(Buffer({"\x02\x08\xff"}), &head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unparsable header")));
}

}  // namespace
}  // namespace ferry
