// Large call messages as a stream of frames (rpc/stream_call.h), received
// straight into one buffer.
//
// A message of N bytes travels in rpc/wire/frames.h's framing, the one
// collective messages use too: the first frame's head is a
// proto::StreamHead (N, and `align`), later frames have none, and the
// frames' payloads are the message's bytes in order (senders put at most
// kChunkBytes in a frame). `align` (< 64) is where the sender's largest
// piece (a tensor's bytes) begins, modulo 64: the receiver places the
// message so that piece lands 64-byte aligned, and the reader can
// reference it. Between processes of one host a head may name a memory
// file holding the message instead (`shm`, rpc/shm_message.h): then it
// is the only frame, with no payload.
#ifndef FERRY_RPC_CHUNKED_MESSAGE_H_
#define FERRY_RPC_CHUNKED_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/call_stream.pb.h"
#include "rpc/peer_budget.h"
#include "rpc/shm_message.h"
#include "rpc/wire/frames.h"

namespace ferry {

// Messages at least this long travel as frames; most payload a frame has.
constexpr size_t kStreamMinBytes = size_t{2} << 20;
constexpr size_t kChunkBytes = size_t{1} << 20;
// A StreamHead is at most 83 bytes (two ShmRefs of 33); a longer first
// frame's head is no head of ours.
constexpr int64_t kMaxStreamHeadBytes = 128;

// The head of `message`'s first frame: its total and align.
proto::StreamHead HeadOf(const grpc::ByteBuffer& message);

// The frames of `message`, referencing its slices (no copy).
std::vector<grpc::ByteBuffer> SplitIntoChunks(const grpc::ByteBuffer& message,
                                              size_t chunk_bytes);

// Sends one message as frames, one after another (gRPC takes one write at
// a time), each frame's references dropped once it was sent.
class ChunkWriter {
 public:
  // Splits `message` into frames of kChunkBytes (no copy).
  void Reset(const grpc::ByteBuffer& message);
  // The frames of `payload` under `head` (which has its total and align:
  // HeadOf); one frame for an empty payload (a message in a file).
  void Reset(const proto::StreamHead& head, const grpc::ByteBuffer& payload);
  // The next message to write, or null when all were written.
  grpc::ByteBuffer* Next();
  // Whether the message Next() returned last is the final one.
  bool last() const { return next_ == chunks_.size(); }

 private:
  std::vector<grpc::ByteBuffer> chunks_;
  size_t next_ = 0;
};

// Receives one message's frames into one buffer. Each frame is copied into
// the buffer as it arrives and its gRPC buffers are freed at once, so a
// message costs about its own size. The buffer grows with what arrived
// (doubling, so a message is moved at most about once in all), never with
// what the head announced: a head, or a stream that stops sending, holds
// about what was sent. Not thread-safe (one stream's reads are sequential).
class ChunkAssembler {
 public:
  // Copies the `total`-byte message in the memory file a head names into
  // `into`: how a stream's receiver takes messages in files.
  using FileReader = std::function<absl::Status(const proto::ShmRef& ref,
                                                uint64_t total, char* into)>;

  // `what` names the message in errors ("request", "reply"). A head
  // announcing more than `max_bytes` (--max_message_mb), or more than
  // `budget` (if any) could ever hold, is refused before anything is
  // allocated; the buffer's bytes are taken from `budget` for `peer` as it
  // grows, and stay taken until the buffer is freed (after Take(): when
  // the last value referencing it goes).
  // The message of a head naming a file is copied into the buffer by
  // `read_file` (null: such a head is refused).
  ChunkAssembler(std::string what, int64_t max_bytes,
                 std::shared_ptr<PeerBudget> budget = nullptr,
                 std::string peer = "", FileReader read_file = nullptr);
  ~ChunkAssembler();
  ChunkAssembler(const ChunkAssembler&) = delete;
  ChunkAssembler& operator=(const ChunkAssembler&) = delete;

  // Takes the stream's next message, a frame (and empties it). Errors:
  //   a frame ReadFrame refuses, a first frame without a StreamHead (or
  //   one without its total), a later one with a head, `align` >= 64,
  //   payload past the announced length, a head naming a file where
  //   none is taken, payload after such a head           INVALID_ARGUMENT
  //   a file `read_file` refuses                          its code
  //   an announced length over max_bytes or what the budget could ever
  //   hold, a buffer the budget cannot grow into now (naming
  //   --max_message_mb, --max_stream_mb_per_peer, --grpc_memory_mb), or
  //   no memory                                           RESOURCE_EXHAUSTED
  absl::Status Add(grpc::ByteBuffer* message);

  bool started() const { return started_; }
  bool complete() const { return started_ && received_ == total_; }
  // "request: 5 of 9 bytes received": why an ended stream is short.
  std::string Progress() const;
  // Bytes allocated for the message so far (what the budget holds for it).
  int64_t reserved() const { return capacity_; }
  // The file the head offered for the reply (a request's), if any.
  const proto::ShmRef* reply_to() const {
    return reply_to_.pid() != 0 ? &reply_to_ : nullptr;
  }

  // The whole message as one slice over the buffer (complete() only); the
  // assembler no longer owns the buffer.
  grpc::ByteBuffer Take();

 private:
  absl::Status Head(const proto::StreamHead& head);
  // Takes the message from the file `ref` names.
  absl::Status ReadFile(const proto::ShmRef& ref);
  // Copies a frame's payload in after what arrived.
  absl::Status Append(const WireFrame& frame);
  // Grows the buffer (and what the budget holds) to hold `bytes` of the
  // message, keeping what arrived.
  absl::Status Reserve(uint64_t bytes);
  // Frees the buffer and gives its bytes back (if not taken).
  void Release();

  const std::string what_;
  const int64_t max_bytes_;
  const std::shared_ptr<PeerBudget> budget_;
  const std::string peer_;
  const FileReader read_file_;
  bool started_ = false;
  char* base_ = nullptr;  // The allocation (malloc'd), until taken.
  int64_t capacity_ = 0;  // Its size, all of it taken from budget_.
  char* data_ = nullptr;  // Where the message starts in it.
  uint64_t align_ = 0;    // Byte `align_` of the message is 64-aligned.
  uint64_t total_ = 0;
  uint64_t received_ = 0;
  proto::ShmRef reply_to_;
};

}  // namespace ferry

#endif  // FERRY_RPC_CHUNKED_MESSAGE_H_
