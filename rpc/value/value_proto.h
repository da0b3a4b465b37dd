// Conversion between Value/Tensor and their wire messages (proto/value.proto).
//
// Decoding validates everything a peer could get wrong and reports
// INVALID_ARGUMENT (or RESOURCE_EXHAUSTED, over a Limits bound) with the
// path of the offending field, e.g. "args[1].shape[0]: negative dimension
// -2". Encoding checks what the
// C++ types cannot rule out (nesting depth, UTF-8 strings).
//
// Tensor bytes: decoding from a mutable message moves the bytes out of it
// (no copy); encoding copies them once into the message.
#ifndef FERRY_RPC_VALUE_VALUE_PROTO_H_
#define FERRY_RPC_VALUE_VALUE_PROTO_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/value.pb.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// How RRefs inside a Value cross the wire; the rref/ layer implements it.
// One codec serves one call with one peer: the sender's codec forks each
// RRef for the receiver (Encode) and, before the message goes out, waits
// until the owners registered those forks (ReadyToSend); the receiver's
// codec turns handles into usable RRefs (Decode). Without a codec, RRefs
// travel as bare descriptors.
class RRefCodec {
 public:
  virtual ~RRefCodec() = default;
  virtual absl::StatusOr<proto::RRefHandle> Encode(
      const Value::RRefPtr& rref) = 0;
  virtual absl::StatusOr<Value::RRefPtr> Decode(
      const proto::RRefHandle& handle) = 0;
  // Resolves once everything Encode produced may be sent.
  virtual Future<Done> ReadyToSend() { return Future<Done>::Ready(Done()); }
  // What was encoded was not delivered (or may not have been): forks the
  // receiver never confirmed are released.
  virtual void Abandon() {}
};

// Makes the codec for one call exchanging values with `peer` (a node id).
class CodecFactory {
 public:
  virtual ~CodecFactory() = default;
  virtual std::unique_ptr<RRefCodec> ForPeer(uint64_t peer) = 0;
};

// A codec made only when the first RRef is met, so a call whose values
// hold none (the common case) costs no codec. Without a factory, RRefs
// travel as bare descriptors.
class LazyCodec final : public RRefCodec {
 public:
  LazyCodec(CodecFactory* factory = nullptr, uint64_t peer = 0)
      : factory_(factory), peer_(peer) {}

  absl::StatusOr<proto::RRefHandle> Encode(const Value::RRefPtr& rref) override;
  absl::StatusOr<Value::RRefPtr> Decode(
      const proto::RRefHandle& handle) override;
  Future<Done> ReadyToSend() override {
    return real_ ? real_->ReadyToSend() : Future<Done>::Ready(Done());
  }
  void Abandon() override {
    if (real_) real_->Abandon();
  }
  // True once an RRef went through.
  bool used() const { return real_ != nullptr; }
  // Drops the real codec (and what it keeps alive for the call).
  void Release() { real_.reset(); }

 private:
  RRefCodec* Real();

  CodecFactory* factory_;
  uint64_t peer_;
  std::unique_ptr<RRefCodec> real_;
};

void TensorToProto(const Tensor& tensor, proto::Tensor* out);

// Consumes `in`'s bytes. `path` prefixes error messages. The shape must
// keep within `limits` (tensor.h "Shape rules").
absl::StatusOr<Tensor> TensorFromProto(proto::Tensor* in,
                                       absl::string_view path,
                                       const Limits& limits = DefaultLimits());

absl::Status ValueToProto(const Value& value, proto::Value* out,
                          RRefCodec* codec = nullptr);

// Decodes the values of one message against `limits`:
//   nesting deeper than kMaxValueDepth, a tensor shape over
//   --max_tensor_rank/--max_tensor_dim        INVALID_ARGUMENT
//   more than --max_items values (of any kind, at any depth, counted
//   across every Decode of this decoder), a string, bytes or map key
//   longer than --max_string_mb               RESOURCE_EXHAUSTED
// each naming the path ("args[1].shape[0]: …") and the flag. Checks are
// O(items + rank) — never O(tensor elements), except bool bytes (0/1).
//
//   ValueDecoder decoder(limits, &codec);
//   for (int i = 0; i < n; ++i)
//     FERRY_ASSIGN_OR_RETURN(Value v, decoder.Decode(args->Mutable(i),
//                                                    StrCat("args[", i, "]")));
class ValueDecoder {
 public:
  explicit ValueDecoder(const Limits& limits = DefaultLimits(),
                        RRefCodec* codec = nullptr)
      : limits_(limits), codec_(codec) {}

  // Consumes `in`'s tensor bytes and strings. `path` names the value in
  // errors ("args[0]").
  absl::StatusOr<Value> Decode(proto::Value* in, absl::string_view path);

  // Values decoded so far (every list, map, tensor and scalar counts 1).
  int64_t items() const { return items_; }

 private:
  absl::StatusOr<Value> DecodeAt(proto::Value* in, int depth,
                                 const std::string& path);
  absl::StatusOr<Value> DecodeList(proto::ValueList* in, int depth,
                                   const std::string& path);
  absl::StatusOr<Value> DecodeMap(proto::ValueMap* in, int depth,
                                  const std::string& path);
  absl::Status TakeItems(int64_t n, const std::string& path);
  absl::Status CheckSize(size_t bytes, const std::string& path) const;

  const Limits& limits_;
  RRefCodec* const codec_;
  int64_t items_ = 0;
};

// One value with a decoder of its own (so --max_items counts this value
// alone). Consumes `in`'s tensor bytes.
absl::StatusOr<Value> ValueFromProto(proto::Value* in, absl::string_view path,
                                     RRefCodec* codec = nullptr,
                                     const Limits& limits = DefaultLimits());

// As above for a message that must not be modified (copies tensor bytes).
absl::StatusOr<Value> ValueFromProtoCopy(
    const proto::Value& in, absl::string_view path, RRefCodec* codec = nullptr,
    const Limits& limits = DefaultLimits());

// The checks every Value encoder makes: INVALID_ARGUMENT naming `path`.
absl::Status CheckValueString(absl::string_view text, absl::string_view path);
absl::Status ValueDepthError(absl::string_view path);

proto::RRefHandle DescriptorToProto(const RRefDescriptor& descriptor);
RRefDescriptor DescriptorFromProto(const proto::RRefHandle& handle);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_VALUE_PROTO_H_
