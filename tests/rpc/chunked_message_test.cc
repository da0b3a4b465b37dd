#include "rpc/chunked_message.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

std::string Flat(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!b.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

grpc::ByteBuffer Buffer(const std::vector<std::string>& pieces) {
  std::vector<grpc::Slice> slices;
  for (const std::string& p : pieces) slices.emplace_back(p.data(), p.size());
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// A stream head announcing `total` bytes with alignment hint `align`.
grpc::ByteBuffer Head(uint64_t total, uint64_t align) {
  std::string h(16, '\0');
  for (int i = 0; i < 8; ++i) {
    h[i] = static_cast<char>((total >> (8 * i)) & 0xff);
    h[8 + i] = static_cast<char>((align >> (8 * i)) & 0xff);
  }
  return Buffer({h});
}

TEST(ChunkedMessageTest, RoundTripsAndAlignsTheLargestPiece) {
  std::string big(10000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  const grpc::ByteBuffer message = Buffer({"abc", big, "xyz"});
  std::vector<grpc::ByteBuffer> chunks = SplitIntoChunks(message, 4096);
  ASSERT_EQ(chunks.size(), 1u + 3u);  // The head, then 10006 bytes.
  EXPECT_EQ(chunks[0].Length(), 16u);
  for (size_t i = 1; i < chunks.size(); ++i) {
    EXPECT_LE(chunks[i].Length(), 4096u);
  }
  ChunkAssembler in("request", 1 << 20);
  for (grpc::ByteBuffer& c : chunks) {
    EXPECT_FALSE(in.complete());
    ASSERT_OK(in.Add(&c));
  }
  ASSERT_TRUE(in.complete());
  grpc::ByteBuffer whole = in.Take();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(whole.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(Flat(whole), "abc" + big + "xyz");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slices[0].begin() + 3) % 64, 0u);
}

TEST(ChunkedMessageTest, WriterHandsOutTheHeadThenEachChunkOnce) {
  ChunkWriter w;
  w.Reset(Buffer({std::string(kChunkBytes + 1, 'x')}));
  grpc::ByteBuffer* head = w.Next();
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->Length(), 16u);
  EXPECT_FALSE(w.last());
  ASSERT_NE(w.Next(), nullptr);
  EXPECT_FALSE(w.last());
  grpc::ByteBuffer* tail = w.Next();
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->Length(), 1u);
  EXPECT_TRUE(w.last());
  EXPECT_EQ(w.Next(), nullptr);
}

TEST(ChunkedMessageTest, AnEmptyMessageIsJustItsHead) {
  grpc::Slice empty;
  std::vector<grpc::ByteBuffer> chunks =
      SplitIntoChunks(grpc::ByteBuffer(&empty, 1), kChunkBytes);
  ASSERT_EQ(chunks.size(), 1u);
  ChunkAssembler in("reply", 100);
  ASSERT_OK(in.Add(&chunks[0]));
  EXPECT_TRUE(in.complete());
  EXPECT_EQ(in.Take().Length(), 0u);
}

TEST(ChunkedMessageTest, LengthOverTheLimitIsRefusedBeforeAllocating) {
  ChunkAssembler in("request", 3 << 20);
  grpc::ByteBuffer head = Head(uint64_t{1} << 62, 0);
  EXPECT_THAT(in.Add(&head),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("request: a message of 4611686018427387904 "
                                 "bytes, over the limit of 3 MiB "
                                 "(--max_message_mb=3)")));
  EXPECT_FALSE(in.started());
}

TEST(ChunkedMessageTest, MalformedHeadsAreInvalid) {
  ChunkAssembler in("request", 1 << 20);
  grpc::ByteBuffer short_head = Buffer({"12345"});
  EXPECT_THAT(in.Add(&short_head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a stream head of 5 bytes")));
  grpc::ByteBuffer bad_align = Head(10, 64);
  EXPECT_THAT(in.Add(&bad_align), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("alignment 64")));
  EXPECT_FALSE(in.started());
}

TEST(ChunkedMessageTest, BytesPastTheAnnouncedLengthAreInvalid) {
  ChunkAssembler in("request", 1 << 20);
  grpc::ByteBuffer head = Head(10, 0);
  ASSERT_OK(in.Add(&head));
  grpc::ByteBuffer first = Buffer({"123"});
  ASSERT_OK(in.Add(&first));
  EXPECT_EQ(in.Progress(), "request: 3 of 10 bytes received");
  grpc::ByteBuffer too_long = Buffer({"12345678"});
  EXPECT_THAT(in.Add(&too_long),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a chunk of 8 bytes after 3 of 10")));
  EXPECT_FALSE(in.complete());
}

TEST(ChunkedMessageTest, BuffersHeldAtOnceAreBoundedByTheBudget) {
  auto budget = std::make_shared<ReceiveBudget>(1000);
  ChunkAssembler first("request", 1 << 20, budget);
  grpc::ByteBuffer head = Head(600, 0);
  ASSERT_OK(first.Add(&head));
  EXPECT_GE(budget->used(), 600);
  ChunkAssembler second("request", 1 << 20, budget);
  head = Head(600, 0);
  EXPECT_THAT(second.Add(&head), StatusIs(absl::StatusCode::kResourceExhausted,
                                          HasSubstr("(--grpc_memory_mb=0)")));
  EXPECT_FALSE(second.started());
  {
    grpc::ByteBuffer body = Buffer({std::string(600, 'x')});
    ASSERT_OK(first.Add(&body));
    grpc::ByteBuffer whole = first.Take();
    EXPECT_GE(budget->used(), 600);  // Held while the message is.
  }
  EXPECT_EQ(budget->used(), 0);
  ChunkAssembler third("request", 1 << 20, budget);
  head = Head(600, 0);
  EXPECT_OK(third.Add(&head));
}

}  // namespace
}  // namespace ferry
