// Call messages read straight from gRPC's received bytes into Values: the
// counterpart of wire_writer.h. No protobuf tree is built first.
//
// Why: parsing a CallRequest with the generated code first builds a
// protobuf tree (a Value message of ~100 bytes for every 2 bytes a peer
// sends: one 200 MB message of empty values grew a worker by 8 GiB), and
// only then could limits be checked. This reader checks every Limits bound
// as it goes (arguments, values, nesting, string bytes, tensor rank and
// dims), so a hostile message fails at the first field over a bound, having
// built at most what the limits allow.
//
// The wire format is proto/worker.proto's, read as protobuf would (fields
// in any order, unknown fields skipped, packed or unpacked shapes, a
// repeated message field merged, the last of a oneof winning). Errors:
//   malformed bytes                                  INVALID_ARGUMENT
//   nesting deeper than kMaxValueDepth, an unknown dtype, a tensor shape
//   over --max_tensor_rank/--max_tensor_dim, bytes not matching the shape,
//   invalid UTF-8                                    INVALID_ARGUMENT
//   more than --max_args arguments, more than --max_items values, a string,
//   bytes value or map key over --max_string_mb      RESOURCE_EXHAUSTED
// each naming where ("args[1].shape[0]: …") and, over a limit, the flag.
//
// Tensor bytes: a tensor of at least 4 KiB whose bytes lie in one received
// slice (suitably aligned) references that slice, no copy; otherwise its
// bytes are copied once. Smaller tensors are copied so they never keep a
// large message alive.
#ifndef FERRY_RPC_WIRE_WIRE_READER_H_
#define FERRY_RPC_WIRE_WIRE_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/value.pb.h"
#include "rpc/base/limits.h"
#include "rpc/base/trace_context.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"

namespace ferry {

// The fields of a CallRequest other than its arguments. caller_name is
// skipped, never kept: who calls is its credential's node (caller_node,
// checked), not what it says it is called.
struct CallHeader {
  std::string function;
  uint64_t caller_node = 0;
  std::optional<proto::RRefHandle> create_rref;
  // The caller's trace, if it sent a valid one (else nullopt).
  std::optional<TraceContext> trace;
  // The request has keyword arguments (its kwargs field), read by Args().
  bool kwargs = false;
};

// The longest keyword a call may name (an identifier, as Python's).
inline constexpr size_t kMaxKeywordBytes = 128;

// One received CallRequest: its header is read when opened (cheaply, the
// arguments skipped), its arguments when asked for, so a call can be
// refused (unknown function, a busy peer) before any value is built.
//
//   FERRY_ASSIGN_OR_RETURN(CallRequestReader r,
//                          CallRequestReader::Open(bytes, limits));
//   … r.header().function …
//   Value::Map kwargs;
//   FERRY_ASSIGN_OR_RETURN(std::vector<Value> args, r.Args(&codec, &kwargs));
class CallRequestReader {
 public:
  // References `bytes`' slices (no copy). INVALID_ARGUMENT if the header
  // is malformed.
  static absl::StatusOr<CallRequestReader> Open(const grpc::ByteBuffer& bytes,
                                                const Limits& limits);

  const CallHeader& header() const { return header_; }

  // The arguments, RRefs decoded by `codec` (null: bare descriptors), and
  // the keyword arguments into `*kwargs`. Errors as described above, paths
  // "args[i]…" and "kwargs['name']…"; besides, arguments and keyword
  // arguments together are bounded by --max_args (RESOURCE_EXHAUSTED), and
  // INVALID_ARGUMENT for a kwargs field that is not a map, a keyword that
  // is not a name ([A-Za-z_][A-Za-z0-9_]*) or is longer than
  // kMaxKeywordBytes, or keyword arguments where `kwargs` is null (the
  // reader's user takes none). Call once.
  absl::StatusOr<std::vector<Value>> Args(RRefCodec* codec,
                                          Value::Map* kwargs = nullptr);

 private:
  CallRequestReader(std::vector<grpc::Slice> slices, const Limits& limits)
      : slices_(std::move(slices)), limits_(limits) {}

  std::vector<grpc::Slice> slices_;
  Limits limits_;
  CallHeader header_;
  // The first error met past the header (too many arguments); Args()
  // reports it.
  absl::Status args_error_;
};

// One Value message (a serialized ferry.proto.Value, as EncodeValue writes
// it) held as `slices`, decoded as above with paths "<path>…"; RRefs as
// bare descriptors. If `landing` is given, the first tensor met, if it is
// the landing's size, has its bytes copied there (and references them), so
// a receiver that knows where a tensor belongs copies it once. `landed`:
// the landing is itself one of `slices`, already holding the first
// tensor's bytes (FindTensorData said where): that tensor must be
// exactly there, or the message is malformed.
absl::StatusOr<Value> ReadValue(const std::vector<grpc::Slice>& slices,
                                const Limits& limits, absl::string_view path,
                                TensorLanding* landing = nullptr,
                                bool landed = false);

// Where a tensor's bytes lie in a Value message: an offset into the
// message and a length.
struct TensorPlace {
  uint64_t offset = 0;
  uint64_t length = 0;
};
// The places of the tensors' bytes (depth first, in the order ReadValue
// meets them in a message that EncodeValue wrote) in a Value message of
// `total` bytes of which `slices` are the first, as far as those bytes
// tell: a tensor is placed as soon as the bytes up to its data are there,
// so a receiver can write what follows where it belongs as it arrives.
// Each place lies inside the fields that hold it, hence inside `total`.
// INVALID_ARGUMENT, naming where ("message.list.tensor: …"), for bytes no
// message could begin with: a length past the end of its field, a bad tag,
// nesting deeper than kMaxValueDepth.
absl::StatusOr<std::vector<TensorPlace>> FindTensorData(
    const std::vector<grpc::Slice>& slices, uint64_t total);

// The result of a CallResponse (null if absent), decoded as above; paths
// "result…".
absl::StatusOr<Value> ReadCallResponse(const grpc::ByteBuffer& bytes,
                                       const Limits& limits, RRefCodec* codec);

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_WIRE_READER_H_
