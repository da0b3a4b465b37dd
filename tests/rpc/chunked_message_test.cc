#include "rpc/chunked_message.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "proto/call_stream.pb.h"
#include "rpc/peer_budget.h"
#include "rpc/shm_message.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
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

// A first frame without payload: a StreamHead announcing `total` bytes
// with alignment hint `align`.
grpc::ByteBuffer Head(uint64_t total, uint64_t align) {
  proto::StreamHead head;
  head.set_total(total);
  head.set_align(static_cast<uint32_t>(align));
  const std::string bytes = head.SerializeAsString();
  return Buffer({std::string(1, static_cast<char>(bytes.size())), bytes});
}

// A later frame: the empty head (the byte 0), then `payload`.
grpc::ByteBuffer Chunk(const std::string& payload) {
  return Buffer({std::string(1, '\0'), payload});
}

TEST(ChunkedMessageTest, RoundTripsAndAlignsTheLargestPiece) {
  std::string big(10000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  const grpc::ByteBuffer message = Buffer({"abc", big, "xyz"});
  std::vector<grpc::ByteBuffer> chunks = SplitIntoChunks(message, 4096);
  ASSERT_EQ(chunks.size(), 3u);  // 10006 bytes, the head with the first.
  for (size_t i = 1; i < chunks.size(); ++i) {
    EXPECT_LE(chunks[i].Length(), 4096u + 1);  // And the empty head.
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

TEST(ChunkedMessageTest, WriterHandsOutEachFrameOnce) {
  ChunkWriter w;
  w.Reset(Buffer({std::string(2 * kChunkBytes + 1, 'x')}));
  grpc::ByteBuffer* first = w.Next();
  ASSERT_NE(first, nullptr);
  EXPECT_GT(first->Length(), kChunkBytes);  // The head, and a chunk.
  EXPECT_FALSE(w.last());
  ASSERT_NE(w.Next(), nullptr);
  EXPECT_FALSE(w.last());
  grpc::ByteBuffer* tail = w.Next();
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->Length(), 2u);  // The empty head, and the last byte.
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
  grpc::ByteBuffer no_head = Chunk("12345");
  EXPECT_THAT(in.Add(&no_head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request: a first frame without a stream "
                                 "head")));
  grpc::ByteBuffer past_the_frame = Buffer({"12345"});  // A head of 49.
  EXPECT_THAT(in.Add(&past_the_frame),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request: a frame's head length")));
  grpc::ByteBuffer too_long = Buffer({"\x81\x01", std::string(129, 'x')});
  EXPECT_THAT(in.Add(&too_long),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame head of 129 bytes (at most 128)")));
  grpc::ByteBuffer no_total = Buffer({std::string("\x02\x10\x05", 3)});
  EXPECT_THAT(in.Add(&no_total),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a stream head without the message's "
                                 "total")));
  grpc::ByteBuffer junk = Buffer({std::string("\x02\xff\xff", 3)});
  EXPECT_THAT(in.Add(&junk), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("unparsable header")));
  grpc::ByteBuffer bad_align = Head(10, 64);
  EXPECT_THAT(in.Add(&bad_align), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("alignment 64")));
  EXPECT_FALSE(in.started());
}

TEST(ChunkedMessageTest, BytesPastTheAnnouncedLengthAreInvalid) {
  ChunkAssembler in("request", 1 << 20);
  grpc::ByteBuffer head = Head(10, 0);
  ASSERT_OK(in.Add(&head));
  grpc::ByteBuffer first = Chunk("123");
  ASSERT_OK(in.Add(&first));
  EXPECT_EQ(in.Progress(), "request: 3 of 10 bytes received");
  grpc::ByteBuffer too_long = Chunk("12345678");
  EXPECT_THAT(in.Add(&too_long),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a chunk of 8 bytes after 3 of 10")));
  grpc::ByteBuffer second_head = Head(10, 0);
  EXPECT_THAT(in.Add(&second_head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a frame with a head after 3 of 10 bytes")));
  EXPECT_FALSE(in.complete());
}

// The head and the first payload in one frame, as senders make them.
TEST(ChunkedMessageTest, TheFirstFrameMayCarryPayload) {
  ChunkAssembler in("reply", 1 << 20);
  std::vector<grpc::ByteBuffer> frames =
      SplitIntoChunks(Buffer({"hello"}), kChunkBytes);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_OK(in.Add(&frames[0]));
  ASSERT_TRUE(in.complete());
  EXPECT_EQ(Flat(in.Take()), "hello");
}

TEST(ChunkedMessageTest, ChunksLandAlignedAcrossTheBufferGrowing) {
  // Small chunks: the buffer grows (and may move) several times.
  std::string big(100000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 13);
  const grpc::ByteBuffer message = Buffer({"ab", big, "cdef"});
  std::vector<grpc::ByteBuffer> chunks = SplitIntoChunks(message, 1000);
  ChunkAssembler in("request", 1 << 20);
  int64_t grew = 0, last = 0;
  for (grpc::ByteBuffer& c : chunks) {
    ASSERT_OK(in.Add(&c));
    if (in.reserved() != last) ++grew;
    last = in.reserved();
  }
  EXPECT_GE(grew, 5);
  ASSERT_TRUE(in.complete());
  grpc::ByteBuffer whole = in.Take();
  EXPECT_EQ(Flat(whole), "ab" + big + "cdef");
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(whole.Dump(&slices).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slices[0].begin() + 2) % 64, 0u);
}

// Issue 25 (F5): a head alone reserved all it announced, so two small
// heads held the whole budget until their senders left.
TEST(ChunkedMessageTest, AHeadAloneReservesNothing) {
  auto budget =
      std::make_shared<PeerBudget>(PeerBudget::Options{.max_bytes = 1 << 20});
  ChunkAssembler first("request", 1 << 20, budget, "a");
  ChunkAssembler second("request", 1 << 20, budget, "b");
  grpc::ByteBuffer head = Head(1000000, 0);
  ASSERT_OK(first.Add(&head));
  head = Head(1000000, 0);
  ASSERT_OK(second.Add(&head));
  EXPECT_EQ(budget->used(), 0);
  // What arrives is what is held (at most twice it, and the alignment's).
  grpc::ByteBuffer some = Chunk(std::string(5000, 'x'));
  ASSERT_OK(first.Add(&some));
  EXPECT_GE(budget->used(), 5000);
  EXPECT_LE(budget->used(), 2 * 5000 + 128);
  EXPECT_EQ(budget->used(), first.reserved());
  EXPECT_EQ(budget->used_by("a"), first.reserved());
}

TEST(ChunkedMessageTest, TheReservationGrowsAtMostTwiceWhatArrived) {
  auto budget = std::make_shared<PeerBudget>(PeerBudget::Options{});
  ChunkAssembler in("request", 1 << 24, budget, "a");
  grpc::ByteBuffer head = Head(1 << 23, 0);
  ASSERT_OK(in.Add(&head));
  int64_t received = 0;
  for (int i = 0; i < 40; ++i) {
    grpc::ByteBuffer chunk = Chunk(std::string(4096 + i, 'y'));
    received += 4096 + i;
    ASSERT_OK(in.Add(&chunk));
    EXPECT_LE(in.reserved(), 2 * received + 128) << "after " << received;
  }
}

TEST(ChunkedMessageTest, APeerIsHeldToItsShare) {
  auto budget = std::make_shared<PeerBudget>(PeerBudget::Options{
      .max_bytes = 100 << 20, .max_bytes_per_peer = 1 << 20});
  ChunkAssembler a1("request", 8 << 20, budget, "client node 7");
  grpc::ByteBuffer head = Head(900000, 0);
  ASSERT_OK(a1.Add(&head));
  grpc::ByteBuffer body = Chunk(std::string(600000, 'x'));
  ASSERT_OK(a1.Add(&body));
  // The same peer's second stream cannot take what is left of its share
  // and more...
  ChunkAssembler a2("request", 8 << 20, budget, "client node 7");
  head = Head(900000, 0);
  ASSERT_OK(a2.Add(&head));
  body = Chunk(std::string(600000, 'x'));
  EXPECT_THAT(a2.Add(&body),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("request: 0 of 900000 bytes received"),
                             HasSubstr("client node 7 would hold"),
                             HasSubstr("(--max_stream_mb_per_peer=1)"))));
  // ...while another peer's can.
  ChunkAssembler b("request", 8 << 20, budget, "worker3");
  head = Head(900000, 0);
  ASSERT_OK(b.Add(&head));
  body = Chunk(std::string(900000, 'x'));
  ASSERT_OK(b.Add(&body));
  EXPECT_TRUE(b.complete());
}

TEST(ChunkedMessageTest, AMessageNoBudgetCouldHoldIsRefusedOnItsHead) {
  auto budget = std::make_shared<PeerBudget>(
      PeerBudget::Options{.max_bytes = 4 << 20, .max_bytes_per_peer = 1 << 20});
  ChunkAssembler in("request", 8 << 20, budget, "worker1");
  grpc::ByteBuffer head = Head(2 << 20, 0);
  EXPECT_THAT(in.Add(&head),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("(--max_stream_mb_per_peer=1)")));
  EXPECT_FALSE(in.started());
  auto small =
      std::make_shared<PeerBudget>(PeerBudget::Options{.max_bytes = 1 << 20});
  ChunkAssembler other("request", 8 << 20, small, "worker1");
  head = Head(2 << 20, 0);
  EXPECT_THAT(other.Add(&head), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("(--grpc_memory_mb=1)")));
}

TEST(ChunkedMessageTest, BuffersHeldAtOnceAreBoundedByTheBudget) {
  auto budget =
      std::make_shared<PeerBudget>(PeerBudget::Options{.max_bytes = 1000});
  ChunkAssembler first("request", 1 << 20, budget, "a");
  grpc::ByteBuffer head = Head(600, 0);
  ASSERT_OK(first.Add(&head));
  grpc::ByteBuffer body = Chunk(std::string(600, 'x'));
  ASSERT_OK(first.Add(&body));
  EXPECT_GE(budget->used(), 600);
  ChunkAssembler second("request", 1 << 20, budget, "b");
  head = Head(600, 0);
  ASSERT_OK(second.Add(&head));
  body = Chunk(std::string(600, 'x'));
  EXPECT_THAT(second.Add(&body), StatusIs(absl::StatusCode::kResourceExhausted,
                                          HasSubstr("(--grpc_memory_mb=0)")));
  {
    grpc::ByteBuffer whole = first.Take();
    EXPECT_GE(budget->used(), 600);  // Held while the message is.
  }
  EXPECT_EQ(budget->used(), 0);
  ChunkAssembler third("request", 1 << 20, budget, "b");
  head = Head(600, 0);
  ASSERT_OK(third.Add(&head));
  body = Chunk(std::string(600, 'x'));
  EXPECT_OK(third.Add(&body));
}

TEST(ChunkedMessageTest, AnAbandonedAssemblerGivesItsBytesBack) {
  auto budget = std::make_shared<PeerBudget>(PeerBudget::Options{});
  {
    ChunkAssembler in("request", 1 << 20, budget, "a");
    grpc::ByteBuffer head = Head(10000, 0);
    ASSERT_OK(in.Add(&head));
    grpc::ByteBuffer body = Chunk(std::string(3000, 'x'));
    ASSERT_OK(in.Add(&body));
    EXPECT_GT(budget->used(), 0);
  }
  EXPECT_EQ(budget->used(), 0);
  EXPECT_EQ(budget->peers(), 0u);
}

// The only frame of `message`, written into `file`: a head naming it.
grpc::ByteBuffer FileHead(const grpc::ByteBuffer& message, ShmFile& file) {
  proto::StreamHead head = HeadOf(message);
  absl::StatusOr<proto::ShmRef> at = file.Write(message, head.align());
  EXPECT_TRUE(at.ok()) << at.status();
  *head.mutable_shm() = *at;
  ChunkWriter w;
  w.Reset(head, grpc::ByteBuffer());
  grpc::ByteBuffer frame = *w.Next();
  EXPECT_EQ(w.Next(), nullptr);  // One frame.
  return frame;
}

TEST(ChunkedMessageTest, AMessageInAFileIsTakenFromItsHeadAlone) {
  const grpc::ByteBuffer message = Buffer({"ab", std::string(5000, 'q')});
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  auto budget = std::make_shared<PeerBudget>(PeerBudget::Options{});
  grpc::ByteBuffer taken;
  {
    ChunkAssembler in("request", 1 << 20, budget, "a", ReadPeerFile);
    grpc::ByteBuffer head = FileHead(message, file);
    ASSERT_OK(in.Add(&head));
    ASSERT_TRUE(in.complete());
    taken = in.Take();
  }
  EXPECT_EQ(Flat(taken), Flat(message));
  // Copied into the assembler's own buffer, aligned and budgeted as frames
  // would be: the file can be written again at once.
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(taken.Dump(&slices).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slices[0].begin() + 2) % 64, 0u);
  EXPECT_GE(budget->used(), 5002);
  ASSERT_OK(file.Write(Buffer({"overwritten"}), 0).status());
  EXPECT_EQ(Flat(taken), Flat(message));
  slices.clear();
  taken.Clear();
  EXPECT_EQ(budget->used(), 0);
}

TEST(ChunkedMessageTest, AFileWhereNoneIsTakenIsRefused) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ChunkAssembler in("request", 1 << 20, nullptr, "the caller at ipv4:x");
  grpc::ByteBuffer head = FileHead(Buffer({"abc"}), file);
  EXPECT_THAT(in.Add(&head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a message in a memory file from the caller "
                                 "at ipv4:x, where none is taken")));
}

TEST(ChunkedMessageTest, AFileTheReaderRefusesGivesItsBudgetBack) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  auto budget = std::make_shared<PeerBudget>(PeerBudget::Options{});
  {
    ChunkAssembler in("request", 1 << 20, budget, "a", ReadPeerFile);
    grpc::ByteBuffer head = FileHead(Buffer({"abcdef"}), file);
    // The peer cuts its file before the message is read.
    const int fd = open(absl::StrCat("/proc/self/fd/", file.ref().fd()).c_str(),
                        O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 2), 0);
    close(fd);
    EXPECT_THAT(in.Add(&head),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("request: the memory file"),
                               HasSubstr("less than the message's"))));
  }
  EXPECT_EQ(budget->used(), 0);
}

TEST(ChunkedMessageTest, PayloadAfterAFileHeadIsInvalid) {
  const grpc::ByteBuffer message = Buffer({"abc"});
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef at, file.Write(message, 0));
  proto::StreamHead head = HeadOf(message);
  *head.mutable_shm() = at;
  ChunkWriter w;
  w.Reset(head, message);  // The head names a file and the bytes follow.
  ChunkAssembler in("request", 1 << 20, nullptr, "a", ReadPeerFile);
  EXPECT_THAT(in.Add(w.Next()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a chunk of 3 bytes after 3 of 3")));
}

}  // namespace
}  // namespace ferry
