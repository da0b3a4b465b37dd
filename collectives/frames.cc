#include "collectives/frames.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/wire/bounded_parse.h"
#include "rpc/wire_writer.h"

namespace ferry {

namespace {

grpc::Slice HeaderSlice(const proto::ChunkHeader& header) {
  std::string body = header.SerializeAsString();
  WireWriter w;
  w.Varint(body.size());
  w.Copy(body);
  grpc::ByteBuffer bb = w.Finish();
  std::vector<grpc::Slice> slices;
  (void)bb.Dump(&slices);
  return slices[0];
}

// Reads the frame's slices from the front: the header bytes are gathered
// (they may span slices), the rest is handed out as sub-slices.
class SliceReader {
 public:
  explicit SliceReader(std::vector<grpc::Slice> slices)
      : slices_(std::move(slices)) {}

  // Appends the next `n` bytes to `out`; false if there are fewer.
  bool Take(size_t n, std::string* out) {
    while (n > 0 && si_ < slices_.size()) {
      size_t k = std::min(n, slices_[si_].size() - offset_);
      out->append(reinterpret_cast<const char*>(slices_[si_].begin()) + offset_,
                  k);
      n -= k;
      Advance(k);
    }
    return n == 0;
  }

  // What is left, as sub-slices.
  std::vector<grpc::Slice> Rest(int64_t* bytes) {
    std::vector<grpc::Slice> rest;
    *bytes = 0;
    for (; si_ < slices_.size(); ++si_, offset_ = 0) {
      const grpc::Slice& s = slices_[si_];
      if (offset_ == s.size()) continue;
      rest.push_back(offset_ == 0 ? s : s.sub(offset_, s.size()));
      *bytes += static_cast<int64_t>(rest.back().size());
    }
    return rest;
  }

 private:
  void Advance(size_t k) {
    offset_ += k;
    if (offset_ == slices_[si_].size()) {
      ++si_;
      offset_ = 0;
    }
  }

  std::vector<grpc::Slice> slices_;
  size_t si_ = 0, offset_ = 0;
};

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("collective frame: ", why));
}

}  // namespace

std::vector<grpc::ByteBuffer> MakeFrames(proto::ChunkHeader header,
                                         const grpc::ByteBuffer& payload,
                                         int64_t chunk) {
  std::vector<grpc::Slice> slices;
  if (payload.Valid()) (void)payload.Dump(&slices);
  header.set_total(
      static_cast<int64_t>(payload.Valid() ? payload.Length() : 0));
  std::vector<grpc::ByteBuffer> frames;
  grpc::Slice first = HeaderSlice(header);
  grpc::Slice rest;  // Made for a second frame only (most have one).
  size_t si = 0, offset = 0;
  do {
    if (!frames.empty() && rest.size() == 0) {
      rest = HeaderSlice(proto::ChunkHeader());
    }
    std::vector<grpc::Slice> frame = {frames.empty() ? first : rest};
    int64_t budget = chunk;
    while (budget > 0 && si < slices.size()) {
      size_t take = std::min<size_t>(slices[si].size() - offset, budget);
      frame.push_back(slices[si].sub(offset, offset + take));
      budget -= static_cast<int64_t>(take);
      offset += take;
      if (offset == slices[si].size()) {
        ++si;
        offset = 0;
      }
    }
    frames.emplace_back(frame.data(), frame.size());
  } while (si < slices.size());
  return frames;
}

absl::StatusOr<Frame> ParseFrame(const grpc::ByteBuffer& frame) {
  std::vector<grpc::Slice> slices;
  if (!frame.Valid() || !frame.Dump(&slices).ok() || slices.empty())
    return Bad("empty");
  SliceReader in(std::move(slices));
  // The varint: at most 3 bytes hold kMaxFrameHeaderBytes.
  std::string varint;
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (shift > 14 || !in.Take(1, &varint)) return Bad("bad header length");
    const uint8_t b = static_cast<uint8_t>(varint.back());
    length |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) break;
  }
  if (length > static_cast<uint64_t>(kMaxFrameHeaderBytes)) {
    return Bad(absl::StrCat("a header of ", length, " bytes (at most ",
                            kMaxFrameHeaderBytes, ")"));
  }
  std::string head;
  if (!in.Take(length, &head)) return Bad("truncated header");
  Frame out;
  if (absl::Status parsed =
          BoundedParse(head, DefaultLimits(), "header", &out.header);
      !parsed.ok()) {
    return Bad(absl::StrCat("unparsable header (", parsed.message(), ")"));
  }
  out.payload = in.Rest(&out.payload_bytes);
  return out;
}

}  // namespace ferry
