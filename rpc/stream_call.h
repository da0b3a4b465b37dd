// The client side of calls sent as streams (proto/call_stream.proto, served
// by rpc/call_stream_service.h): the request's bytes go out as chunks
// referencing the tensors (no copy), the reply comes back as chunks into
// one pre-sized buffer that the decoded tensors then reference.
#ifndef FERRY_RPC_STREAM_CALL_H_
#define FERRY_RPC_STREAM_CALL_H_

#include <cstdint>
#include <functional>

#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace ferry {

// Sends `request` (an encoded CallRequest) on `stub` as a stream under
// `context`; the reply's bytes go to `*response` (left alone on error) and
// `done` runs once with the call's status. A reply over `max_reply_bytes`
// is RESOURCE_EXHAUSTED (before it is allocated); a malformed reply stream
// is INTERNAL "malformed reply: …". `context` and `response` must outlive
// `done`.
void StartStreamCall(grpc::GenericStub* stub, grpc::ClientContext* context,
                     const grpc::ByteBuffer& request,
                     grpc::ByteBuffer* response, int64_t max_reply_bytes,
                     std::function<void(const grpc::Status&)> done);

}  // namespace ferry

#endif  // FERRY_RPC_STREAM_CALL_H_
