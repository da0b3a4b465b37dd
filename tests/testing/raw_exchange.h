// A hostile peer's side of the collectives transport, for tests: frames of
// /ferry.proto.Collectives/Exchange built byte by byte
// (collectives/transport/frames.h has the layout) and sent on raw streams, with
// no ferry code on the sending side.
//
//   auto stream = RawExchangeStream::Open(channel, absl::Seconds(5));
//   stream->Write(FrameBytes(DataHeader("world/7", 0, 1, 1 << 30), ""));
//   grpc::Status refused = stream->Finish();
#ifndef FERRY_TESTS_TESTING_RAW_EXCHANGE_H_
#define FERRY_TESTS_TESTING_RAW_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/collectives.pb.h"
#include "rpc/value/value.h"

namespace ferry {
namespace testing {

inline constexpr char kExchangeMethod[] = "/ferry.proto.Collectives/Exchange";
// The standing stream's method (collectives/transport/standing_stream.h): one
// frame per message, each answered by an ack.
inline constexpr char kStandingMethod[] = "/ferry.proto.Collectives/Stream";

// [varint n][header: n bytes][payload].
std::string FrameBytes(const proto::ChunkHeader& header,
                       absl::string_view payload);
grpc::ByteBuffer ToByteBuffer(absl::string_view bytes);
// The serialized proto::Value of `v`: a DATA message's payload.
std::string ValueBytes(const Value& v);

// A DATA payload whose tensor field ends inside its own data field (issue
// 25, F1): `filler` bytes in a bytes_value field (5), then a tensor field
// (6) of 1 byte holding only the key of a data field (3) whose length,
// `data_bytes`, follows past the tensor's end:
//   2a <filler> 32 01 1a <varint data_bytes>
std::string TensorPastItsEndPayload(int64_t filler, int64_t data_bytes);

proto::ChunkHeader DataHeader(std::string op, int step, int src, int64_t total);
proto::ChunkHeader AbortHeader(std::string op, int src, absl::StatusCode code,
                               std::string error);

// One raw Exchange stream. Every wait is bounded by the stream's timeout.
class RawExchangeStream {
 public:
  // The stream's gRPC deadline is `timeout` from now. `token`: the job's
  // token, sent as "authorization: Bearer <token>" ("" = none): the right
  // to connect, which any process of the job has.
  static std::unique_ptr<RawExchangeStream> Open(
      const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout,
      const std::string& token = "", const char* method = kExchangeMethod);
  ~RawExchangeStream();

  // False once the stream is over (the server ended it, or the deadline).
  bool Write(absl::string_view frame);
  // The server's next message (a standing stream's ack) into `out`; false
  // once the stream is over.
  bool Read(std::string* out);
  // Half-closes (once) and returns the server's status.
  grpc::Status Finish();

 private:
  RawExchangeStream() = default;
  // Waits for `tag`'s completion; its ok, or false at the deadline.
  bool Await(void* tag);

  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  absl::Time deadline_;
  bool writes_done_ = false;
  bool finished_ = false;
  grpc::Status status_;
};

// Sends whole `frames` on one stream, half-closes, and returns the status.
grpc::Status SendFrames(const std::shared_ptr<grpc::Channel>& channel,
                        const std::vector<std::string>& frames,
                        absl::Duration timeout = absl::Seconds(10),
                        const std::string& token = "");

// "Bearer <token>" on `context` (nothing if `token` is empty).
void Authorize(grpc::ClientContext* context, const std::string& token);

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_RAW_EXCHANGE_H_
