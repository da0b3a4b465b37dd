// The server side of calls sent as streams (proto/call_stream.proto): a
// large request arrives as chunks into one pre-sized buffer
// (rpc/chunked_message.h), is served by the CallService like any unary
// call (the same bytes, limits, admission, errors and cancellation), and
// its reply goes back as chunks.
//
// Why: a unary message is delivered only once all of it arrived, as ~64 KiB
// slices long out of the cache, and a tensor's bytes must then be copied
// together while the process holds the message twice. Chunks are copied
// into their destination as they arrive (warm, while the next ones are
// being received) and freed at once, and the tensors decoded from the
// buffer reference it: one pass over the payload and about its size in
// memory.
#ifndef FERRY_RPC_CALL_STREAM_SERVICE_H_
#define FERRY_RPC_CALL_STREAM_SERVICE_H_

#include <memory>

#include "grpcpp/support/byte_buffer.h"
#include "proto/call_stream.grpc.pb.h"
#include "rpc/bounded_service.h"
#include "rpc/call_service.h"
#include "rpc/chunked_message.h"

namespace ferry {

// Serves CallStream.Call through `calls` (which must outlive it), within
// its limits: a request over --max_message_mb, or one that would make the
// requests received as streams (and the values still referencing them)
// hold more than --grpc_memory_mb, is refused (RESOURCE_EXHAUSTED) before
// it is allocated; a malformed stream (a bad head, more bytes than
// announced, an early end) is INVALID_ARGUMENT.
class CallStreamService final
    : public BoundedService<proto::CallStream::WithRawCallbackMethod_Call<
          proto::CallStream::Service>> {
 public:
  // Its one method takes raw chunks, assembled by ChunkAssembler and read
  // by CallService's CallRequestReader.
  explicit CallStreamService(CallService* calls)
      : BoundedService(ServiceOf<proto::Chunk>("CallStream"), calls->limits(),
                       calls->worker_name()),
        calls_(calls),
        budget_(std::make_shared<ReceiveBudget>(
            calls->limits().grpc_memory_bytes)) {
    ReadsRaw("Call");
  }

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Call(
      grpc::CallbackServerContext* context) override;

 private:
  CallService* const calls_;
  const std::shared_ptr<ReceiveBudget> budget_;
};

}  // namespace ferry

#endif  // FERRY_RPC_CALL_STREAM_SERVICE_H_
