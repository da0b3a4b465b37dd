// Large call messages as a stream of chunks (rpc/call_stream.h), received
// straight into one pre-sized buffer.
//
// On the wire, one message of N bytes is: a head of exactly 16 bytes (N,
// then `align`, both little-endian uint64), followed by the message's bytes
// in order, in stream messages of any sizes adding up to N (senders use
// kChunkBytes). `align` (< 64) is where the sender's largest piece (a
// tensor's bytes) begins, modulo 64: the receiver places the message so
// that piece lands 64-byte aligned, and the reader can reference it.
#ifndef FERRY_RPC_CHUNKED_MESSAGE_H_
#define FERRY_RPC_CHUNKED_MESSAGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"

namespace ferry {

// Messages at least this long travel as chunks; a chunk's size.
constexpr size_t kStreamMinBytes = size_t{2} << 20;
constexpr size_t kChunkBytes = size_t{1} << 20;

// The head and chunks of `message`, referencing its slices (no copy).
std::vector<grpc::ByteBuffer> SplitIntoChunks(const grpc::ByteBuffer& message,
                                              size_t chunk_bytes);

// Bytes that chunked messages being received, and the values decoded from
// them (which reference their buffers), may hold at once: incoming streams
// are buffered outside gRPC's own memory quota, so they get one of their
// own (--grpc_memory_mb, like gRPC's). Thread-safe.
class ReceiveBudget {
 public:
  explicit ReceiveBudget(int64_t max_bytes) : max_(max_bytes) {}

  // Takes `n` bytes if they fit; false (taking nothing) if not.
  bool TryTake(int64_t n);
  void Give(int64_t n) { used_.fetch_sub(n); }
  int64_t max() const { return max_; }
  int64_t used() const { return used_.load(); }

 private:
  const int64_t max_;
  std::atomic<int64_t> used_{0};
};

// Sends one chunked message: its chunks one after another (gRPC takes one
// write at a time), each chunk's references dropped once it was sent.
class ChunkWriter {
 public:
  // Splits `message` into kChunkBytes chunks (no copy), the head first.
  void Reset(const grpc::ByteBuffer& message);
  // The next message to write, or null when all were written.
  grpc::ByteBuffer* Next();
  // Whether the message Next() returned last is the final one.
  bool last() const { return next_ == chunks_.size(); }

 private:
  std::vector<grpc::ByteBuffer> chunks_;
  size_t next_ = 0;
};

// Receives one chunked message. Each chunk is copied into the destination
// as it arrives and its buffers are freed at once, so a message costs about
// its own size. Not thread-safe (one stream's reads are sequential).
class ChunkAssembler {
 public:
  // `what` names the message in errors ("request", "reply"); messages over
  // `max_bytes` (--max_message_mb), or over what `budget` (if any) has
  // left, are refused before anything is allocated. The buffer's bytes
  // stay taken from `budget` until the buffer is freed.
  ChunkAssembler(std::string what, int64_t max_bytes,
                 std::shared_ptr<ReceiveBudget> budget = nullptr);

  // Takes the stream's next message (and empties it). Errors:
  //   a head that is not 16 bytes, `align` ≥ 64, a chunk past the announced
  //   length, a chunk after the last                      INVALID_ARGUMENT
  //   an announced length over max_bytes or the budget (naming
  //   --max_message_mb, --grpc_memory_mb), or no memory   RESOURCE_EXHAUSTED
  absl::Status Add(grpc::ByteBuffer* message);

  bool started() const { return buffer_ != nullptr; }
  bool complete() const { return started() && received_ == total_; }
  // "request: 5 of 9 bytes received": why an ended stream is short.
  std::string Progress() const;

  // The whole message as one slice over the buffer (complete() only).
  grpc::ByteBuffer Take();

 private:
  absl::Status Head(const grpc::ByteBuffer& head);

  absl::Status Allocate(uint64_t total, uint64_t align);

  const std::string what_;
  const int64_t max_bytes_;
  const std::shared_ptr<ReceiveBudget> budget_;
  std::shared_ptr<char> buffer_;  // Holds the allocation.
  char* data_ = nullptr;          // Where the message starts in it.
  uint64_t total_ = 0;
  uint64_t received_ = 0;
};

}  // namespace ferry

#endif  // FERRY_RPC_CHUNKED_MESSAGE_H_
