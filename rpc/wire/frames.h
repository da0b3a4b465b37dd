// The one chunk framing of ferry's streams: a call's request or reply sent
// as a stream (rpc/chunked_message.h) and a collective message
// (collectives/transport/frames.h) travel alike, as frames, each one gRPC
// message:
//
//   [varint n][head: n bytes][payload bytes]
//
// The first frame's head is the protocol's typed head, a serialized proto
// message saying what the message is and how many payload bytes it has
// (proto::StreamHead for calls, proto::ChunkHeader for collectives); later
// frames have an empty head (n = 0) and carry more payload. Payload bytes
// are referenced, never copied, both ways. Pure functions: no I/O.
#ifndef FERRY_RPC_WIRE_FRAMES_H_
#define FERRY_RPC_WIRE_FRAMES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace ferry {

// One frame, read.
struct WireFrame {
  // The head's bytes: 0 on a later frame.
  int64_t head_bytes = 0;
  // The payload (sub-slices of the frame: no copy).
  std::vector<grpc::Slice> payload;
  int64_t payload_bytes = 0;
};

// `payload` cut into frames of at most `chunk` payload bytes each, the
// first carrying `head` (sub-slices of the payload: no copy). An empty
// payload makes one frame.
std::vector<grpc::ByteBuffer> SplitIntoFrames(
    const google::protobuf::MessageLite& head, const grpc::ByteBuffer& payload,
    int64_t chunk);

// Reads `frame`; its head, if it has one, is parsed into `head` (through
// BoundedParse), which is cleared otherwise. INVALID_ARGUMENT, naming
// `what`, for a frame without bytes, a head length that is no varint
// within the frame or is over `max_head_bytes`, or an unparsable head.
absl::StatusOr<WireFrame> ReadFrame(const grpc::ByteBuffer& frame,
                                    int64_t max_head_bytes,
                                    absl::string_view what,
                                    google::protobuf::Message* head);

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_FRAMES_H_
