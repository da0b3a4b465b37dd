// Protobuf wire format written straight into a grpc::ByteBuffer, with large
// byte strings as slices over their owners' memory instead of copies.
//
// gRPC's protobuf serializer copies every bytes field; for tensors that is
// one more pass over every payload (and, for large ones, a freshly mapped
// buffer to fault in). This writer emits the same bytes a protobuf
// serializer would, so receivers parse them with the ordinary generated
// code.
#ifndef FERRY_RPC_WIRE_WIRE_WRITER_H_
#define FERRY_RPC_WIRE_WIRE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/worker.pb.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"

namespace ferry {

class WireWriter {
 public:
  // Bytes at least this long are referenced, not copied.
  static constexpr size_t kAliasMin = 4096;

  void Key(int field, int wire_type) {
    Varint((uint64_t(field) << 3) | wire_type);
  }
  void Varint(uint64_t v);
  void Fixed64(uint64_t v);
  void Copy(absl::string_view bytes) {
    pending_.append(bytes.data(), bytes.size());
  }
  // `message` serialized, in place.
  void Message(const google::protobuf::MessageLite& message) {
    message.AppendToString(&pending_);
  }
  // `bytes`, kept alive by `owner` until gRPC is done with them.
  void Alias(absl::string_view bytes, std::shared_ptr<const void> owner);

  grpc::ByteBuffer Finish();

  static size_t VarintSize(uint64_t v);

 private:
  void Flush();

  std::string pending_;
  // A message is one slice, or a few around aliased tensors.
  absl::InlinedVector<grpc::Slice, 4> slices_;
};

// The wire bytes of a Value (a serialized ferry.proto.Value), tensor bytes
// referenced from the tensors.
absl::StatusOr<grpc::ByteBuffer> EncodeValue(const Value& value,
                                             RRefCodec* codec,
                                             absl::string_view path);

// The wire bytes of a CallRequest for `args` and keyword arguments
// `kwargs` (a map, or null for none; an empty map is not sent), which the
// tensors in them stay alive for, via the slices. RRefs are encoded by
// `codec`; errors are those of ValueToProto, naming args[i] or
// kwargs['name'].
absl::StatusOr<grpc::ByteBuffer> EncodeCallRequest(
    const proto::CallRequest& header, const std::vector<Value>& args,
    RRefCodec* codec, const Value& kwargs = Value());

// The wire bytes of a CallResponse whose result is `result` (tensor bytes
// referenced). Errors are those of ValueToProto, naming "result".
absl::StatusOr<grpc::ByteBuffer> EncodeCallResponse(const Value& result,
                                                    RRefCodec* codec);

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_WIRE_WRITER_H_
