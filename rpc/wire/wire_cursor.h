// A read position in protobuf wire bytes held as gRPC slices: the one place
// where offsets and lengths taken from a peer's bytes are computed.
//
// Every read is bounded by the innermost limit — the end of the message,
// or of a length-delimited field entered with Enter — so no varint, skip
// or sub-range can reach past the field that holds it, and a length is
// checked against what its field has left before anything uses it. The
// arithmetic happens here, once, on the invariant position <= limit.
//
//   WireCursor in(&slices);
//   WireCursor::Tag tag;
//   while (in.ReadTag(&tag)) {
//     if (WireCursor::FieldOf(tag) != proto::Value::kListFieldNumber) {
//       if (!in.SkipField(tag)) break;
//       continue;
//     }
//     uint64_t outer;
//     if (!in.EnterLength(&outer)) break;
//     … reads inside the list, none past its end …
//     if (!in.SkipToLimit()) break;
//     in.Leave(outer);
//   }
//   if (in.stop() == WireStop::kMalformed) … INVALID_ARGUMENT …
//
// A failed read moves the cursor nowhere useful: the cursor stays failed
// (every later read fails too, with the same stop()), so a walk ends at the
// first failure however deeply it is nested.
//
// The cursor does the bounds and the positions; protobuf decodes. Its
// CodedInputStream alone would not do: it counts positions in int and stops
// at 2 GiB, while a collective message may be larger when --max_mailbox_mb
// allows it. So the cursor counts in uint64 and hands protobuf only a
// primitive's own bytes (at most 10, gathered where they cross slices) to
// decode: varints are read by VarintParse (what generated code parses
// with), fixed-width numbers by the coded stream's little-endian readers,
// tags and wire types by WireFormatLite. Groups, which no ferry message uses,
// are malformed.
//
// A cursor may be given a limit past the bytes it holds (the first frames
// of a longer message): a read that would pass the bytes there are stops
// kTruncated rather than kMalformed, so a walk over a prefix can tell "not
// here yet" from "wrong".
#ifndef FERRY_RPC_WIRE_WIRE_CURSOR_H_
#define FERRY_RPC_WIRE_WIRE_CURSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/slice.h"

namespace ferry {

// Whether [offset, offset + length) lies within [0, size), computed without
// overflow.
constexpr bool RangeWithin(uint64_t offset, uint64_t length, uint64_t size) {
  return length <= size && offset <= size - length;
}

// Where in a message a decoder is ("args[1].shape[0]"), for errors: a chain
// of nodes on the decoder's stack, rendered only when an error names it.
struct WirePath {
  const WirePath* parent = nullptr;
  absl::string_view text;  // A root ("args"), a key or a field name.
  int64_t index = -1;      // "[index]" if >= 0 (after text, for a root).

  std::string Render() const;
  WirePath Item(int64_t i) const { return WirePath{this, "", i}; }
  // ".key" or ".field".
  WirePath Key(absl::string_view key) const { return WirePath{this, key, -1}; }
  WirePath Field(absl::string_view name) const {
    return WirePath{this, name, -1};
  }
};

// Why a read failed.
enum class WireStop {
  kNone,       // No read failed (a ReadTag at the limit is not a failure).
  kMalformed,  // Past the innermost limit, a bad tag or wire type, a
               // varint over 10 bytes.
  kTruncated,  // The bytes ended before the limit did (a prefix).
};

// A run of the message's bytes a cursor took (WireCursor::Take): `size()`
// bytes from `position()` on, all there. Copies are cheap; it refers to the
// cursor's slices, which must outlive it.
class WireBytes {
 public:
  uint64_t position() const { return position_; }
  uint64_t size() const { return size_; }
  // Copies the bytes to `out` (size() bytes).
  void CopyTo(char* out) const;
  // Their address and the slice holding them if they lie in one slice
  // (size() > 0); nullptr otherwise.
  const char* Contiguous(const grpc::Slice** slice) const;

 private:
  friend class WireCursor;
  const std::vector<grpc::Slice>* slices_ = nullptr;
  size_t slice_ = 0;   // The slice holding the first byte.
  size_t offset_ = 0;  // Of the first byte in that slice.
  uint64_t position_ = 0;
  uint64_t size_ = 0;
};

class WireCursor {
 public:
  using Tag = uint32_t;
  using WireType = google::protobuf::internal::WireFormatLite::WireType;

  static int FieldOf(Tag tag) {
    return google::protobuf::internal::WireFormatLite::GetTagFieldNumber(tag);
  }
  static WireType TypeOf(Tag tag) {
    return google::protobuf::internal::WireFormatLite::GetTagWireType(tag);
  }
  static constexpr Tag MakeTag(int field, WireType type) {
    return google::protobuf::internal::WireFormatLite::MakeTag(field, type);
  }

  WireCursor() = default;
  // Reads `slices` (which must outlive the cursor, its copies and what it
  // takes), limited to their end.
  explicit WireCursor(const std::vector<grpc::Slice>* slices);
  // Limited to `limit` bytes instead: fewer than the slices hold (reads
  // past `limit` are malformed), or more (a prefix: reads past the slices
  // stop kTruncated).
  WireCursor(const std::vector<grpc::Slice>* slices, uint64_t limit);

  uint64_t position() const { return pos_; }
  // Bytes before the innermost limit (for a prefix, not all there).
  uint64_t left() const { return limit_ - pos_; }
  WireStop stop() const { return stop_; }
  bool failed() const { return stop_ != WireStop::kNone; }
  // What the first failure was, for errors ("" if none).
  const char* what() const { return what_; }

  // The next field's tag. False at the innermost limit (stop() stays
  // kNone) or on a failure: a tag over 32 bits, field number 0, or a wire
  // type that is not varint, fixed64, length-delimited or fixed32.
  bool ReadTag(Tag* tag) {
    if (pos_ == limit_) return false;  // The end (or a failure's stop).
    // The common case inline: a one-byte tag of a known wire type.
    if (stop_ == WireStop::kNone && p_ != slice_end_ && pos_ < limit_ &&
        *p_ < 0x80 && (*p_ >> 3) != 0 && ((kKnownWireTypes >> (*p_ & 7)) & 1)) {
      *tag = *p_++;
      ++pos_;
      return true;
    }
    return ReadTagSlow(tag);
  }
  // A varint of at most 10 bytes (bits past 64 dropped, as protobuf does).
  bool ReadVarint(uint64_t* v) {
    // Most varints (tags, small lengths) are one byte: read inline.
    if (stop_ == WireStop::kNone && p_ != slice_end_ && pos_ < limit_ &&
        *p_ < 0x80) {
      *v = *p_++;
      ++pos_;
      return true;
    }
    return ReadVarintSlow(v);
  }
  bool ReadFixed64(uint64_t* v);
  bool ReadFixed32(uint32_t* v);
  // A length-delimited field's length: at most left().
  bool ReadLength(uint64_t* n);
  bool Skip(uint64_t n);
  // Skips the value of the field whose tag was just read.
  bool SkipField(Tag tag);
  // Moves to the innermost limit.
  bool SkipToLimit() { return Skip(left()); }
  // The next `n` bytes, moving past them.
  bool Take(uint64_t n, WireBytes* out);
  // Copies the next `n` bytes to `out`, moving past them.
  bool Copy(uint64_t n, char* out);

  // Limits reads to the next `n` bytes (n <= left()) until Leave(*outer).
  bool Enter(uint64_t n, uint64_t* outer);
  // ReadLength, then Enter that many bytes.
  bool EnterLength(uint64_t* outer);
  // Back to the limit Enter replaced; reads continue from where they are.
  void Leave(uint64_t outer) { limit_ = outer; }

 private:
  bool Fail(WireStop why, const char* what) {
    if (stop_ == WireStop::kNone) {
      stop_ = why;
      what_ = what;
    }
    return false;
  }
  // Varint, fixed64, length-delimited and fixed32, as bits by wire type:
  // the types ReadTag takes (no ferry message has groups).
  static constexpr unsigned kKnownWireTypes = 0b100111;
  // The varint or tag where the inline case does not hold.
  bool ReadVarintSlow(uint64_t* v);
  bool ReadTagSlow(Tag* tag);
  // Fails unless `n` bytes are left before the limit and there.
  bool Have(uint64_t n);
  // Points `bytes` at the next `n` bytes (callers check they are there):
  // into the current slice, or gathered into `scratch` (n bytes) where they
  // cross slices. Does not move.
  bool Peek(uint64_t n, const uint8_t** bytes, uint8_t* scratch);
  // Copies the next `n` bytes to `out` without moving; fails kTruncated
  // if they are not all there.
  bool Gather(uint64_t n, uint8_t* out);
  // Moves into the next non-empty slice (bytes must be left).
  void NextSlice();

  const std::vector<grpc::Slice>* slices_ = nullptr;
  size_t next_ = 0;     // The slice to enter next.
  size_t current_ = 0;  // The slice p_ points into.
  const uint8_t* p_ = nullptr;
  const uint8_t* slice_end_ = nullptr;
  uint64_t pos_ = 0;
  uint64_t end_ = 0;    // The bytes there are.
  uint64_t limit_ = 0;  // The innermost limit; pos_ <= limit_ always.
  WireStop stop_ = WireStop::kNone;
  const char* what_ = "";
};

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_WIRE_CURSOR_H_
