#include "rpc/wire/wire_cursor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

using WFL = google::protobuf::internal::WireFormatLite;

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

bool WireCursor::Byte(uint8_t* b) {
  if (!Have(1)) return false;
  if (p_ == slice_end_) NextSlice();
  *b = *p_++;
  ++pos_;
  return true;
}

bool WireCursor::ReadVarint(uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    uint8_t b;
    if (!Byte(&b)) return false;
    if (shift < 64) result |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return Fail(WireStop::kMalformed, "a varint of more than 10 bytes");
}

bool WireCursor::ReadTag(Tag* tag) {
  if (failed()) return false;
  if (pos_ == limit_) return false;  // The end: no failure.
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
  if (!Have(8)) return false;
  uint64_t result = 0;
  for (int i = 0; i < 8; ++i) {
    uint8_t b;
    Byte(&b);
    result |= uint64_t{b} << (8 * i);
  }
  *v = result;
  return true;
}

bool WireCursor::ReadFixed32(uint32_t* v) {
  uint64_t result = 0;
  if (!Have(4)) return false;
  for (int i = 0; i < 4; ++i) {
    uint8_t b;
    Byte(&b);
    result |= uint64_t{b} << (8 * i);
  }
  *v = static_cast<uint32_t>(result);
  return true;
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
