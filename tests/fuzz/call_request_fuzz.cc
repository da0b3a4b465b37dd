// Fuzz target: the bytes of a received CallRequest → its header and
// argument Values through rpc/wire/wire_reader.h (the worker's call path), with
// no RRef codec and with a fake one that refuses owner ranks outside the
// job the way rref/'s does, under default or tight limits; and the same
// bytes as a CallResponse.
//
// Input: the first byte's bits pick the codec, the limits and how the rest
// is cut into gRPC slices (one, or pieces of 1..64 bytes, so values that
// straddle slices are read too); the rest is the message.
// Properties: no crash, no leak; what decodes encodes again with the wire
// writer and reads back to the same values (compared as JSON, which shows
// NaN) and the same trace context, unless it holds an invalid string the
// writer refuses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/worker.pb.h"
#include "rpc/base/limits.h"
#include "rpc/base/trace_binary.h"
#include "rpc/value/json.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"
#include "rpc/wire/wire_reader.h"
#include "rpc/wire/wire_writer.h"
#include "tests/fuzz/fake_codec.h"

namespace ferry {
namespace {

using fuzz::FakeCodec;
using fuzz::TightLimits;

grpc::ByteBuffer Buffer(const uint8_t* data, size_t size, size_t piece) {
  std::vector<grpc::Slice> slices;
  if (piece == 0) piece = size + 1;
  for (size_t i = 0; i < size; i += piece) {
    slices.emplace_back(data + i, std::min(piece, size - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Json(const std::vector<Value>& values) {
  return ToJson(Value(Value::List(values.begin(), values.end())));
}

void CheckRequest(const grpc::ByteBuffer& bytes, RRefCodec* codec,
                  const Limits& limits) {
  absl::StatusOr<CallRequestReader> reader =
      CallRequestReader::Open(bytes, limits);
  if (!reader.ok()) return;
  Value::Map kwargs;
  absl::StatusOr<std::vector<Value>> args = reader->Args(codec, &kwargs);
  if (!args.ok()) return;
  proto::CallRequest header;
  header.set_function(reader->header().function);
  header.set_caller_node(reader->header().caller_node);
  const std::optional<TraceContext>& trace = reader->header().trace;
  if (trace) header.set_trace_context(FormatTraceparentBinary(*trace));
  LazyCodec plain;
  absl::StatusOr<grpc::ByteBuffer> again =
      EncodeCallRequest(header, *args, &plain, Value(kwargs));
  if (!again.ok()) return;
  absl::StatusOr<CallRequestReader> reread =
      CallRequestReader::Open(*again, limits);
  if (!reread.ok()) std::abort();
  Value::Map kwargs2;
  absl::StatusOr<std::vector<Value>> args2 = reread->Args(codec, &kwargs2);
  if (!args2.ok() || Json(*args2) != Json(*args) ||
      ToJson(Value(kwargs2)) != ToJson(Value(kwargs)) ||
      reread->header().function != reader->header().function ||
      reread->header().trace.has_value() != trace.has_value() ||
      (trace && (reread->header().trace->trace_id() != trace->trace_id() ||
                 reread->header().trace->span_id != trace->span_id ||
                 reread->header().trace->sampled != trace->sampled))) {
    std::abort();
  }
}

void CheckResponse(const grpc::ByteBuffer& bytes, RRefCodec* codec,
                   const Limits& limits) {
  absl::StatusOr<Value> v = ReadCallResponse(bytes, limits, codec);
  if (!v.ok()) return;
  LazyCodec plain;
  absl::StatusOr<grpc::ByteBuffer> again = EncodeCallResponse(*v, &plain);
  if (!again.ok()) return;
  absl::StatusOr<Value> w = ReadCallResponse(*again, limits, codec);
  if (!w.ok() || ToJson(*w) != ToJson(*v)) std::abort();
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const ferry::Limits* const tight =
      new ferry::Limits(ferry::TightLimits());
  const uint8_t mode = data[0];
  ferry::FakeCodec codec;
  ferry::RRefCodec* c = (mode & 1) ? &codec : nullptr;
  const ferry::Limits& limits = (mode & 2) ? *tight : ferry::DefaultLimits();
  const size_t piece = (mode >> 2) == 0 ? 0 : (mode >> 2);
  grpc::ByteBuffer bytes = ferry::Buffer(data + 1, size - 1, piece);
  ferry::CheckRequest(bytes, c, limits);
  ferry::CheckResponse(bytes, c, limits);
  return 0;
}
