#include "rpc/wire/frames.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "rpc/base/limits.h"
#include "rpc/wire/bounded_parse.h"
#include "rpc/wire/wire_cursor.h"

namespace ferry {

namespace {

using ::google::protobuf::io::CodedOutputStream;

// [varint n][head: n bytes], in one slice.
grpc::Slice HeadSlice(const google::protobuf::MessageLite& head) {
  const size_t n = head.ByteSizeLong();
  const size_t prefix = CodedOutputStream::VarintSize64(n);
  grpc::Slice slice(prefix + n);
  uint8_t* out = const_cast<uint8_t*>(slice.begin());
  out = CodedOutputStream::WriteVarint64ToArray(n, out);
  head.SerializeWithCachedSizesToArray(out);
  return slice;
}

// The bytes of `slices` from `position` on, as sub-slices (no copy);
// `position` is at most their size (a cursor's position over them).
std::vector<grpc::Slice> SlicesFrom(const std::vector<grpc::Slice>& slices,
                                    uint64_t position, int64_t* bytes) {
  std::vector<grpc::Slice> rest;
  *bytes = 0;
  for (const grpc::Slice& s : slices) {
    if (position >= s.size()) {
      position -= s.size();
      continue;
    }
    rest.push_back(position == 0 ? s : s.sub(position, s.size()));
    *bytes += static_cast<int64_t>(rest.back().size());
    position = 0;
  }
  return rest;
}

absl::Status Bad(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

}  // namespace

std::vector<grpc::ByteBuffer> SplitIntoFrames(
    const google::protobuf::MessageLite& head, const grpc::ByteBuffer& payload,
    int64_t chunk) {
  std::vector<grpc::Slice> slices;
  if (payload.Valid()) (void)payload.Dump(&slices);
  std::vector<grpc::ByteBuffer> frames;
  const grpc::Slice first = HeadSlice(head);
  // A later frame's empty head: the one byte of the varint 0.
  static const uint8_t kNoHead = 0;
  const grpc::Slice no_head(&kNoHead, 1, grpc::Slice::STATIC_SLICE);
  size_t si = 0, offset = 0;
  do {
    std::vector<grpc::Slice> frame = {frames.empty() ? first : no_head};
    int64_t budget = chunk;
    while (budget > 0 && si < slices.size()) {
      const size_t take = std::min<size_t>(slices[si].size() - offset, budget);
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

absl::StatusOr<WireFrame> ReadFrame(const grpc::ByteBuffer& frame,
                                    int64_t max_head_bytes,
                                    absl::string_view what,
                                    google::protobuf::Message* head) {
  std::vector<grpc::Slice> slices;
  if (!frame.Valid() || !frame.Dump(&slices).ok() || frame.Length() == 0) {
    return Bad(what, "an empty frame");
  }
  // The cursor bounds the length by the frame's bytes, so the head lies
  // within the frame before its length is compared with anything.
  WireCursor in(&slices);
  uint64_t n = 0;
  if (!in.ReadLength(&n)) {
    return Bad(what, absl::StrCat("a frame's head length (", in.what(), ")"));
  }
  if (n > static_cast<uint64_t>(max_head_bytes)) {
    return Bad(what, absl::StrCat("a frame head of ", n, " bytes (at most ",
                                  max_head_bytes, ")"));
  }
  WireFrame out;
  out.head_bytes = static_cast<int64_t>(n);
  head->Clear();
  if (n > 0) {
    std::string bytes(n, '\0');
    (void)in.Copy(n, bytes.data());  // Within the frame: ReadLength said so.
    if (absl::Status parsed =
            BoundedParse(bytes, DefaultLimits(), "frame head", head);
        !parsed.ok()) {
      return Bad(what,
                 absl::StrCat("unparsable header (", parsed.message(), ")"));
    }
  }
  out.payload = SlicesFrom(slices, in.position(), &out.payload_bytes);
  return out;
}

}  // namespace ferry
