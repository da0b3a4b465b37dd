#include "collectives/transport/frames.h"

#include <utility>

namespace ferry {

std::vector<grpc::ByteBuffer> MakeFrames(proto::ChunkHeader header,
                                         const grpc::ByteBuffer& payload,
                                         int64_t chunk) {
  header.set_total(
      static_cast<int64_t>(payload.Valid() ? payload.Length() : 0));
  return SplitIntoFrames(header, payload, chunk);
}

absl::StatusOr<Frame> ParseFrame(const grpc::ByteBuffer& bytes) {
  Frame out;
  absl::StatusOr<WireFrame> frame =
      ReadFrame(bytes, kMaxFrameHeaderBytes, "collective frame", &out.header);
  if (!frame.ok()) return frame.status();
  out.payload = std::move(frame->payload);
  out.payload_bytes = frame->payload_bytes;
  return out;
}

}  // namespace ferry
