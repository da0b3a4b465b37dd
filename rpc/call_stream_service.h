// The server side of calls sent as streams (proto/call_stream.proto): a
// large request arrives as chunks into one buffer (rpc/chunked_message.h),
// is served by the CallService like any unary call (the same bytes,
// limits, admission, errors and cancellation), and its reply goes back as
// chunks.
//
// Why: a unary message is delivered only once all of it arrived, as ~64 KiB
// slices long out of the cache, and a tensor's bytes must then be copied
// together while the process holds the message twice. Chunks are copied
// into their destination as they arrive (warm, while the next ones are
// being received) and freed at once, and the tensors decoded from the
// buffer reference it: one pass over the payload and about its size in
// memory.
//
// What one peer can hold open here is bounded (rpc/base/limits.h), each
// bound named in its error:
//   - a request's buffer grows with the bytes that arrived, never with
//     what its head announces, and is taken from a PeerBudget: at most
//     --max_stream_mb_per_peer for one peer (the node its credential
//     proves, or its connection), --grpc_memory_mb for all
//     (RESOURCE_EXHAUSTED);
//   - a request must arrive whole within --stream_ttl_ms of its stream's
//     start, or the stream ends DEADLINE_EXCEEDED and its buffer is freed
//     (an idle or half-sent stream holds nothing for long);
//   - streams open at once, all connections together, share
//     --max_open_streams with the collectives' Exchange streams, and one
//     peer may have --max_open_streams_per_peer of them
//     (RESOURCE_EXHAUSTED at once for one past either, naming the peer).
// A request over --max_message_mb is refused on its head; a malformed
// stream (a bad head, more bytes than announced, an early end) is
// INVALID_ARGUMENT.
#ifndef FERRY_RPC_CALL_STREAM_SERVICE_H_
#define FERRY_RPC_CALL_STREAM_SERVICE_H_

#include <memory>

#include "grpcpp/support/byte_buffer.h"
#include "proto/call_stream.grpc.pb.h"
#include "rpc/base/timers.h"
#include "rpc/call_service.h"
#include "rpc/peer_budget.h"
#include "rpc/wire/bounded_service.h"

namespace ferry {

class CallStreamService final
    : public BoundedService<proto::CallStream::WithRawCallbackMethod_Call<
          proto::CallStream::Service>> {
 public:
  struct Options {
    // Partial requests expire on these (--stream_ttl_ms). Required.
    Timers* timers = nullptr;
    // Streams open at once (OpenStreamsBudget: --max_open_streams, and
    // --max_open_streams_per_peer for one peer), shared with the other
    // streaming services; null: not counted.
    std::shared_ptr<PeerBudget> open_streams;
    // Take requests in memory files from callers on this host's local
    // socket, and write replies into theirs (rpc/shm_message.h).
    bool shared_memory = true;
  };

  // Serves through `calls`, which must outlive this, with its limits and
  // authenticator. Its one method takes raw chunks, assembled by
  // ChunkAssembler and read by CallService's CallRequestReader.
  CallStreamService(CallService* calls, Options options);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Call(
      grpc::CallbackServerContext* context) override;

  // What the requests received as streams hold now.
  const PeerBudget& budget() const { return *budget_; }

 private:
  CallService* const calls_;
  const Options options_;
  const std::shared_ptr<PeerBudget> budget_;
};

}  // namespace ferry

#endif  // FERRY_RPC_CALL_STREAM_SERVICE_H_
