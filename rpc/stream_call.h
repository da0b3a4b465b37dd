// The client side of calls sent as streams (proto/call_stream.proto, served
// by rpc/call_stream_service.h): the request's bytes go out as chunks
// referencing the tensors (no copy), the reply comes back as chunks into
// one pre-sized buffer that the decoded tensors then reference. To a peer
// on this host, messages may travel in memory files instead
// (rpc/shm_message.h).
#ifndef FERRY_RPC_STREAM_CALL_H_
#define FERRY_RPC_STREAM_CALL_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "rpc/shm_message.h"

namespace ferry {

// The memory files of one streamed call to a peer on this host.
struct StreamFiles {
  // Holds the request at `request_at`, which then goes in it (not as
  // frames).
  std::optional<ShmFile> request;
  proto::ShmRef request_at;
  // Offered to the peer for the reply.
  std::optional<ShmFile> reply;
  // Set when the reply came in `reply` (the peer can open this process's
  // files: requests may go in files too).
  bool reply_in_file = false;
  // Whether the request went in `request` (kept after the file is not).
  bool request_in_file() const { return request_at.pid() != 0; }
};

// Sends `request` (an encoded CallRequest) on `stub` as a stream under
// `context`; the reply's bytes go to `*response` (left alone on error) and
// `done` runs once with the call's status. A reply over `max_reply_bytes`
// is RESOURCE_EXHAUSTED (before it is allocated); a malformed reply stream
// is INTERNAL "malformed reply: …". `files` (null: none) are the call's
// memory files. `context`, `response` and `files` must outlive `done`.
void StartStreamCall(grpc::GenericStub* stub, grpc::ClientContext* context,
                     const grpc::ByteBuffer& request,
                     grpc::ByteBuffer* response, int64_t max_reply_bytes,
                     StreamFiles* files,
                     std::function<void(const grpc::Status&)> done);

}  // namespace ferry

#endif  // FERRY_RPC_STREAM_CALL_H_
