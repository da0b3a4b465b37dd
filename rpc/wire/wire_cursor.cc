#include "rpc/wire/wire_cursor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/parse_context.h"

namespace ferry {

namespace {

using WFL = google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// The most bytes a varint takes (protobuf's bound).
constexpr uint64_t kMaxVarintBytes = 10;

uint64_t TotalOf(const std::vector<grpc::Slice>& slices) {
  uint64_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  return total;
}

}  // namespace

std::string WirePath::Render() const {
  std::string out = parent != nullptr ? parent->Render() : "";
  if (!out.empty() && !text.empty()) absl::StrAppend(&out, ".");
  absl::StrAppend(&out, text);
  if (index >= 0) absl::StrAppend(&out, "[", index, "]");
  return out;
}

void WireBytes::CopyTo(char* out) const {
  uint64_t n = size_;
  size_t i = slice_;
  size_t offset = offset_;
  while (n > 0) {
    const grpc::Slice& s = (*slices_)[i++];
    const uint64_t run = std::min<uint64_t>(n, s.size() - offset);
    std::memcpy(out, s.begin() + offset, run);
    out += run;
    n -= run;
    offset = 0;
  }
}

const char* WireBytes::Contiguous(const grpc::Slice** slice) const {
  if (size_ == 0) return nullptr;
  const grpc::Slice& s = (*slices_)[slice_];
  if (size_ > s.size() - offset_) return nullptr;
  *slice = &s;
  return reinterpret_cast<const char*>(s.begin()) + offset_;
}

WireCursor::WireCursor(const std::vector<grpc::Slice>* slices)
    : slices_(slices), end_(TotalOf(*slices)), limit_(end_) {}

WireCursor::WireCursor(const std::vector<grpc::Slice>* slices, uint64_t limit)
    : slices_(slices), end_(TotalOf(*slices)), limit_(limit) {}

void WireCursor::NextSlice() {
  while (next_ < slices_->size()) {
    const grpc::Slice& s = (*slices_)[next_++];
    if (s.size() == 0) continue;
    current_ = next_ - 1;
    p_ = s.begin();
    slice_end_ = s.end();
    return;
  }
}

bool WireCursor::Have(uint64_t n) {
  if (failed()) return false;
  if (n > left()) {
    return Fail(WireStop::kMalformed,
                "a field runs past the end of the message holding it");
  }
  if (n > end_ - std::min(pos_, end_)) {
    return Fail(WireStop::kTruncated, "the bytes end before the message does");
  }
  return true;
}

// The cursor finds a primitive's bytes and checks them against the limits;
// protobuf's code decodes them, handed only those bytes (at most the 10 a
// varint may take), so its int positions and 2 GiB limit never meet the
// cursor's uint64 ones (a collective message may pass 2 GiB).
bool WireCursor::Gather(uint64_t n, uint8_t* out) {
  uint64_t got = 0;
  const uint8_t* p = p_;
  const uint8_t* end = slice_end_;
  size_t next = next_;
  while (got < n) {
    while (p == end) {
      if (next == slices_->size()) {
        return Fail(WireStop::kTruncated,
                    "the bytes end before the message does");
      }
      const grpc::Slice& s = (*slices_)[next++];
      p = s.begin();
      end = s.end();
    }
    const uint64_t run = std::min<uint64_t>(n - got, end - p);
    std::memcpy(out + got, p, run);
    p += run;
    got += run;
  }
  return true;
}

bool WireCursor::Peek(uint64_t n, const uint8_t** bytes, uint8_t* scratch) {
  if (p_ == slice_end_ && pos_ < end_) NextSlice();
  if (static_cast<uint64_t>(slice_end_ - p_) >= n) {
    *bytes = p_;  // The common case: all in the current slice.
    return true;
  }
  *bytes = scratch;
  return Gather(n, scratch);
}

bool WireCursor::ReadVarintSlow(uint64_t* v) {
  if (failed()) return false;
  if (p_ == slice_end_ && pos_ < end_) NextSlice();
  // protobuf's VarintParse (what generated code parses with) reads up to 10
  // bytes with no bound of its own. It reads the slice in place where it
  // cannot leave it — 10 bytes there, or the slice's last byte ends a
  // varint (the test protobuf's own coded stream makes) — and what it took
  // is then held to the limit. Otherwise, and to name a failure, it reads a
  // copy of the bytes there (at most 10, gathered across slices,
  // zero-padded: a zero byte ends any varint).
  const uint64_t room = std::min<uint64_t>(kMaxVarintBytes, left());
  const uint64_t in_slice = static_cast<uint64_t>(slice_end_ - p_);
  if (in_slice >= kMaxVarintBytes || (in_slice > 0 && slice_end_[-1] < 0x80)) {
    const char* start = reinterpret_cast<const char*>(p_);
    const char* after = google::protobuf::internal::VarintParse(start, v);
    if (after != nullptr && static_cast<uint64_t>(after - start) <= room) {
      p_ += after - start;  // Within the limit, the bytes and the slice.
      pos_ += static_cast<uint64_t>(after - start);
      return true;
    }
  }
  const uint64_t there = std::min<uint64_t>(room, end_ - std::min(pos_, end_));
  uint8_t scratch[kMaxVarintBytes] = {};
  if (!Gather(there, scratch)) return false;
  const char* start = reinterpret_cast<const char*>(scratch);
  const char* after = google::protobuf::internal::VarintParse(start, v);
  const uint64_t took = after != nullptr
                            ? static_cast<uint64_t>(after - start)
                            : kMaxVarintBytes + 1;  // All 10 said "more".
  if (took <= there) return Skip(took);
  if (there == kMaxVarintBytes) {
    return Fail(WireStop::kMalformed, "a varint of more than 10 bytes");
  }
  if (there == left()) {
    return Fail(WireStop::kMalformed,
                "a field runs past the end of the message holding it");
  }
  return Fail(WireStop::kTruncated, "the bytes end before the message does");
}

bool WireCursor::ReadTagSlow(Tag* tag) {
  if (failed()) return false;
  uint64_t v;
  if (!ReadVarint(&v)) return false;
  if (v > UINT32_MAX) return Fail(WireStop::kMalformed, "a tag over 32 bits");
  *tag = static_cast<Tag>(v);
  if (FieldOf(*tag) == 0) return Fail(WireStop::kMalformed, "field number 0");
  switch (TypeOf(*tag)) {
    case WFL::WIRETYPE_VARINT:
    case WFL::WIRETYPE_FIXED64:
    case WFL::WIRETYPE_LENGTH_DELIMITED:
    case WFL::WIRETYPE_FIXED32:
      return true;
    default:  // Groups (and 6, 7): no ferry message has them.
      return Fail(WireStop::kMalformed, "a group or an unknown wire type");
  }
}

bool WireCursor::ReadFixed64(uint64_t* v) {
  uint8_t scratch[8];
  const uint8_t* bytes = scratch;
  if (!Have(8) || !Peek(8, &bytes, scratch)) return false;
  CodedInputStream::ReadLittleEndian64FromArray(bytes, v);
  return Skip(8);
}

bool WireCursor::ReadFixed32(uint32_t* v) {
  uint8_t scratch[4];
  const uint8_t* bytes = scratch;
  if (!Have(4) || !Peek(4, &bytes, scratch)) return false;
  CodedInputStream::ReadLittleEndian32FromArray(bytes, v);
  return Skip(4);
}

bool WireCursor::ReadLength(uint64_t* n) {
  if (!ReadVarint(n)) return false;
  if (*n > left()) {
    return Fail(WireStop::kMalformed, "a length past the end of its field");
  }
  return true;
}

bool WireCursor::Skip(uint64_t n) {
  if (!Have(n)) return false;
  while (n > 0) {
    if (p_ == slice_end_) NextSlice();
    const uint64_t run = std::min<uint64_t>(n, slice_end_ - p_);
    p_ += run;
    pos_ += run;
    n -= run;
  }
  return true;
}

bool WireCursor::SkipField(Tag tag) {
  uint64_t v;
  uint32_t v32;
  switch (TypeOf(tag)) {
    case WFL::WIRETYPE_VARINT:
      return ReadVarint(&v);
    case WFL::WIRETYPE_FIXED64:
      return ReadFixed64(&v);
    case WFL::WIRETYPE_FIXED32:
      return ReadFixed32(&v32);
    case WFL::WIRETYPE_LENGTH_DELIMITED:
      return ReadLength(&v) && Skip(v);
    default:
      return Fail(WireStop::kMalformed, "a group or an unknown wire type");
  }
}

bool WireCursor::Take(uint64_t n, WireBytes* out) {
  if (!Have(n)) return false;
  if (n > 0 && p_ == slice_end_) NextSlice();
  out->slices_ = slices_;
  out->slice_ = current_;
  out->offset_ =
      n > 0 ? static_cast<size_t>(p_ - (*slices_)[current_].begin()) : 0;
  out->position_ = pos_;
  out->size_ = n;
  return Skip(n);
}

bool WireCursor::Copy(uint64_t n, char* out) {
  WireBytes bytes;
  if (!Take(n, &bytes)) return false;
  bytes.CopyTo(out);
  return true;
}

bool WireCursor::Enter(uint64_t n, uint64_t* outer) {
  if (failed()) return false;
  if (n > left()) {
    return Fail(WireStop::kMalformed, "a length past the end of its field");
  }
  *outer = limit_;
  limit_ = pos_ + n;
  return true;
}

bool WireCursor::EnterLength(uint64_t* outer) {
  uint64_t n;
  return ReadLength(&n) && Enter(n, outer);
}

}  // namespace ferry
