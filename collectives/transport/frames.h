// The frames of a collective message on an Exchange stream
// (proto/collectives.proto has the layout), in rpc/wire/frames.h's framing,
// the one streamed calls use too: each frame is one gRPC message
//
//   [varint n][ChunkHeader: n bytes][payload bytes]
//
// The first frame's header names the message (op, step, src) and its
// payload's total size; later frames carry an empty header and more
// payload. Pure functions over gRPC byte buffers: no I/O.
#ifndef FERRY_COLLECTIVES_TRANSPORT_FRAMES_H_
#define FERRY_COLLECTIVES_TRANSPORT_FRAMES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/collectives.pb.h"
#include "rpc/wire/frames.h"

namespace ferry {

// Largest header a frame may have: an op key of a large group, plus an
// abort's error text (cut to kMaxAbortErrorBytes by senders).
inline constexpr int64_t kMaxFrameHeaderBytes = 64 * 1024;
inline constexpr int64_t kMaxAbortErrorBytes = 4 * 1024;

struct Frame {
  proto::ChunkHeader header;
  // The payload bytes (sub-slices of the frame: no copy).
  std::vector<grpc::Slice> payload;
  int64_t payload_bytes = 0;
};

// `payload` cut into frames of at most `chunk` payload bytes each; the
// first carries `header` with its total set (sub-slices, no copy). An
// empty payload makes one frame.
std::vector<grpc::ByteBuffer> MakeFrames(proto::ChunkHeader header,
                                         const grpc::ByteBuffer& payload,
                                         int64_t chunk);

// One frame, parsed (ReadFrame, heads of at most kMaxFrameHeaderBytes).
// INVALID_ARGUMENT for what ReadFrame refuses.
absl::StatusOr<Frame> ParseFrame(const grpc::ByteBuffer& frame);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_FRAMES_H_
