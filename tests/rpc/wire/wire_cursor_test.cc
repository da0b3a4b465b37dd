// The one cursor through peers' wire bytes: no read passes the innermost
// limit, lengths are checked against their field, a prefix tells "not here
// yet" from "wrong", and a failure sticks.
#include "rpc/wire/wire_cursor.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using WFL = google::protobuf::internal::WireFormatLite;

// `bytes` cut into slices of `piece` bytes.
std::vector<grpc::Slice> Slices(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> out;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    const std::string part = bytes.substr(at, piece);
    out.emplace_back(part.data(), part.size());
  }
  return out;
}

TEST(WireCursorTest, RangeWithinIsCheckedWithoutOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(RangeWithin(0, 0, 0));
  EXPECT_TRUE(RangeWithin(3, 7, 10));
  EXPECT_FALSE(RangeWithin(4, 7, 10));
  EXPECT_FALSE(RangeWithin(11, 0, 10));
  EXPECT_FALSE(RangeWithin(kMax, 2, 10));  // offset + length wraps to 1.
  EXPECT_FALSE(RangeWithin(2, kMax, 10));
}

TEST(WireCursorTest, ReadsFieldsAcrossSlices) {
  // field 1 varint 300; field 2 "hello"; field 3 fixed64; field 4 fixed32.
  const std::string wire = std::string("\x08\xac\x02\x12\x05hello\x19", 11) +
                           std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8) +
                           std::string("\x25\x09\x00\x00\x00", 5);
  for (size_t piece : {1, 2, 3, 100}) {
    const std::vector<grpc::Slice> slices = Slices(wire, piece);
    WireCursor in(&slices);
    WireCursor::Tag tag;
    uint64_t v;
    ASSERT_TRUE(in.ReadTag(&tag));
    EXPECT_EQ(WireCursor::FieldOf(tag), 1);
    ASSERT_TRUE(in.ReadVarint(&v));
    EXPECT_EQ(v, 300u);
    ASSERT_TRUE(in.ReadTag(&tag));
    EXPECT_EQ(tag, WireCursor::MakeTag(2, WFL::WIRETYPE_LENGTH_DELIMITED));
    uint64_t n;
    ASSERT_TRUE(in.ReadLength(&n));
    WireBytes hello;
    ASSERT_TRUE(in.Take(n, &hello));
    std::string copy(hello.size(), '\0');
    hello.CopyTo(copy.data());
    EXPECT_EQ(copy, "hello");
    const grpc::Slice* slice = nullptr;
    EXPECT_EQ(hello.Contiguous(&slice) != nullptr, piece >= 100) << piece;
    ASSERT_TRUE(in.ReadTag(&tag));
    ASSERT_TRUE(in.ReadFixed64(&v));
    EXPECT_EQ(v, 0x0807060504030201u);
    ASSERT_TRUE(in.ReadTag(&tag));
    uint32_t v32;
    ASSERT_TRUE(in.ReadFixed32(&v32));
    EXPECT_EQ(v32, 9u);
    EXPECT_FALSE(in.ReadTag(&tag));  // The end: no failure.
    EXPECT_EQ(in.stop(), WireStop::kNone);
    EXPECT_EQ(in.position(), wire.size());
  }
}

// Issue 25, F1: a varint that ran past the field holding it was read
// anyway, and its length compared with a wrapped-around `end - pos`.
TEST(WireCursorTest, NoReadPassesTheFieldItIsIn) {
  // A field of 1 byte holding only a tag; its length follows outside.
  const std::string wire("\x32\x01\x1a\x80\x80\x04", 6);
  const std::vector<grpc::Slice> slices = Slices(wire, 100);
  WireCursor in(&slices);
  WireCursor::Tag tag;
  uint64_t outer, n;
  ASSERT_TRUE(in.ReadTag(&tag));
  ASSERT_TRUE(in.EnterLength(&outer));
  EXPECT_EQ(in.left(), 1u);
  ASSERT_TRUE(in.ReadTag(&tag));
  EXPECT_EQ(WireCursor::FieldOf(tag), 3);
  EXPECT_FALSE(in.ReadLength(&n));
  EXPECT_EQ(in.stop(), WireStop::kMalformed);
  EXPECT_STREQ(in.what(),
               "a field runs past the end of the message holding it");
  // The failure sticks: nothing reads on.
  in.Leave(outer);
  EXPECT_FALSE(in.ReadTag(&tag));
  EXPECT_FALSE(in.Skip(0));
}

TEST(WireCursorTest, LengthsAreCheckedAgainstTheirField) {
  const std::string wire("\x12\x05\x0a\x09xyz", 7);  // Inner length 9 > 3.
  const std::vector<grpc::Slice> slices = Slices(wire, 100);
  WireCursor in(&slices);
  WireCursor::Tag tag;
  uint64_t outer, n;
  ASSERT_TRUE(in.ReadTag(&tag));
  EXPECT_FALSE(in.Enter(7, &outer));  // Past the message.
  EXPECT_EQ(in.stop(), WireStop::kMalformed);

  WireCursor again(&slices);
  ASSERT_TRUE(again.ReadTag(&tag));
  ASSERT_TRUE(again.EnterLength(&outer));
  ASSERT_TRUE(again.ReadTag(&tag));
  EXPECT_FALSE(again.ReadLength(&n));
  EXPECT_STREQ(again.what(), "a length past the end of its field");

  WireCursor skip(&slices);
  EXPECT_FALSE(skip.Skip(8));
  EXPECT_EQ(skip.stop(), WireStop::kMalformed);
}

TEST(WireCursorTest, APrefixStopsTruncatedNotMalformed) {
  // A 10-byte field of which 3 bytes are here; the message is 12 bytes.
  const std::string prefix("\x12\x0a\x01\x02\x03", 5);
  const std::vector<grpc::Slice> slices = Slices(prefix, 2);
  WireCursor in(&slices, 12);
  WireCursor::Tag tag;
  uint64_t outer;
  ASSERT_TRUE(in.ReadTag(&tag));
  ASSERT_TRUE(in.EnterLength(&outer));
  EXPECT_EQ(in.position(), 2u);
  EXPECT_EQ(in.left(), 10u);  // Known, though not all here.
  EXPECT_FALSE(in.SkipToLimit());
  EXPECT_EQ(in.stop(), WireStop::kTruncated);
  // Past the declared length it is malformed, here or not.
  WireCursor past(&slices, 12);
  ASSERT_TRUE(past.ReadTag(&tag));
  EXPECT_FALSE(past.Enter(12, &outer));
  EXPECT_EQ(past.stop(), WireStop::kMalformed);
  // A limit shorter than the bytes: what is past it is malformed.
  WireCursor shorter(&slices, 3);
  ASSERT_TRUE(shorter.ReadTag(&tag));
  EXPECT_FALSE(shorter.EnterLength(&outer));
  EXPECT_EQ(shorter.stop(), WireStop::kMalformed);
}

TEST(WireCursorTest, BadTagsAndVarints) {
  const std::vector<std::string> bad = {
      std::string("\x00", 1),                       // Field number 0.
      std::string("\x0b", 1),                       // A group.
      std::string("\x0e", 1),                       // Wire type 6.
      std::string("\x80\x80\x80\x80\x80\x01", 6),   // A tag over 32 bits.
      std::string(11, '\x80') + std::string(1, 1),  // An 11-byte varint.
  };
  for (const std::string& wire : bad) {
    const std::vector<grpc::Slice> slices = Slices(wire, 100);
    WireCursor in(&slices);
    WireCursor::Tag tag;
    EXPECT_FALSE(in.ReadTag(&tag));
    EXPECT_EQ(in.stop(), WireStop::kMalformed) << in.what();
  }
  // A 10-byte varint's bits past 64 are dropped, as protobuf does.
  const std::string ten = std::string(9, '\xff') + std::string(1, '\x7f');
  const std::vector<grpc::Slice> slices = Slices(ten, 100);
  WireCursor in(&slices);
  uint64_t v;
  ASSERT_TRUE(in.ReadVarint(&v));
  EXPECT_EQ(v, std::numeric_limits<uint64_t>::max());
}

// Varints of every length from 1 to 10 bytes, and fixed-width numbers, cut
// by slices of every size: decoded by protobuf's coded stream whole or
// gathered across slices, the same numbers either way.
TEST(WireCursorTest, NumbersDecodeWhereverSlicesCutThem) {
  std::string wire;
  std::vector<uint64_t> numbers;
  for (int bytes = 1; bytes <= 10; ++bytes) {
    // The largest number of `bytes` bytes, then the smallest.
    const uint64_t top = bytes == 10 ? std::numeric_limits<uint64_t>::max()
                                     : (uint64_t{1} << (7 * bytes)) - 1;
    const uint64_t bottom = bytes == 1 ? 0 : uint64_t{1} << (7 * (bytes - 1));
    for (uint64_t n : {top, bottom}) {
      numbers.push_back(n);
      uint8_t out[10];
      uint8_t* end =
          google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(n, out);
      ASSERT_EQ(end - out, bytes) << n;
      wire.append(reinterpret_cast<const char*>(out), end - out);
    }
  }
  wire += std::string("\x01\x02\x03\x04\x05\x06\x07\x08\xaa\xbb\xcc\xdd", 12);
  for (size_t piece = 1; piece <= wire.size(); ++piece) {
    const std::vector<grpc::Slice> slices = Slices(wire, piece);
    WireCursor in(&slices);
    for (uint64_t n : numbers) {
      uint64_t v = 0;
      ASSERT_TRUE(in.ReadVarint(&v)) << piece << " " << in.what();
      EXPECT_EQ(v, n) << piece;
    }
    uint64_t v64 = 0;
    uint32_t v32 = 0;
    ASSERT_TRUE(in.ReadFixed64(&v64));
    EXPECT_EQ(v64, 0x0807060504030201u) << piece;
    ASSERT_TRUE(in.ReadFixed32(&v32));
    EXPECT_EQ(v32, 0xddccbbaau) << piece;
    EXPECT_EQ(in.left(), 0u);
  }
}

// A varint still going where the bytes end: "not here yet" in a prefix,
// wrong where its field ends, wherever the slices are cut.
TEST(WireCursorTest, AnUnfinishedVarintStopsByWhichBoundItMet) {
  const std::string wire("\x80\x80\x80", 3);
  for (size_t piece : {1, 2, 3}) {
    const std::vector<grpc::Slice> slices = Slices(wire, piece);
    uint64_t v;
    WireCursor prefix(&slices, 8);
    EXPECT_FALSE(prefix.ReadVarint(&v));
    EXPECT_EQ(prefix.stop(), WireStop::kTruncated) << piece;
    WireCursor whole(&slices);
    EXPECT_FALSE(whole.ReadVarint(&v));
    EXPECT_EQ(whole.stop(), WireStop::kMalformed) << piece;
    EXPECT_STREQ(whole.what(),
                 "a field runs past the end of the message holding it");
    uint32_t v32;
    WireCursor fixed(&slices, 8);
    EXPECT_FALSE(fixed.ReadFixed32(&v32));
    EXPECT_EQ(fixed.stop(), WireStop::kTruncated) << piece;
  }
}

TEST(WireCursorTest, PathsRender) {
  const WirePath root{nullptr, "args", -1};
  const WirePath item = root.Item(1);
  EXPECT_EQ(item.Field("shape").Item(0).Render(), "args[1].shape[0]");
  const WirePath empty{nullptr, "", -1};
  EXPECT_EQ(empty.Field("forks").Render(), "forks");
  EXPECT_EQ(empty.Render(), "");
}

}  // namespace
}  // namespace ferry
