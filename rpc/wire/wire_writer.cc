#include "rpc/wire/wire_writer.h"

#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLength = 2;

// Field numbers of proto/value.proto and proto/worker.proto.
enum ValueField {
  kBool = 1,
  kInt,
  kDouble,
  kString,
  kBytes,
  kTensor,
  kList,
  kMap,
  kRRef
};
enum TensorField { kDType = 1, kShape, kData };
constexpr int kCallArgs = 2;
constexpr int kCallKwargs = 7;
constexpr int kResponseResult = 1;

size_t KeySize(int field) {
  return WireWriter::VarintSize(uint64_t(field) << 3);
}
size_t LengthField(int field, size_t body) {
  return KeySize(field) + WireWriter::VarintSize(body) + body;
}

void DestroyOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

// Two passes over a Value: Size() computes every message's length (in
// visiting order, with RRefs encoded once), Write() emits them.
class ValueEncoder {
 public:
  explicit ValueEncoder(RRefCodec* codec) : codec_(codec) {}

  absl::StatusOr<size_t> Size(const Value& v, int depth,
                              const std::string& path);
  void Write(const Value& v, WireWriter* w);

 private:
  absl::StatusOr<size_t> Body(const Value& v, int depth,
                              const std::string& path);
  size_t TensorBody(const Tensor& t);
  void WriteTensor(const Tensor& t, WireWriter* w);

  RRefCodec* const codec_;
  // Lengths of nested messages, in order (inline for small values).
  absl::InlinedVector<size_t, 8> sizes_;
  std::vector<std::string> rrefs_;  // Encoded handles, in order.
  size_t next_size_ = 0;
  size_t next_rref_ = 0;
};

size_t ValueEncoder::TensorBody(const Tensor& t) {
  size_t n =
      KeySize(kDType) + WireWriter::VarintSize(static_cast<int>(t.dtype()));
  if (t.rank() > 0) {
    size_t packed = 0;
    for (int64_t d : t.shape())
      packed += WireWriter::VarintSize(static_cast<uint64_t>(d));
    n += LengthField(kShape, packed);
  }
  if (t.nbytes() > 0) n += LengthField(kData, t.nbytes());
  return n;
}

absl::StatusOr<size_t> ValueEncoder::Body(const Value& v, int depth,
                                          const std::string& path) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return 0;
    case Value::Kind::kBool:
      return KeySize(kBool) + 1;
    case Value::Kind::kInt:
      return KeySize(kInt) +
             WireWriter::VarintSize(static_cast<uint64_t>(v.as_int()));
    case Value::Kind::kDouble:
      return KeySize(kDouble) + 8;
    case Value::Kind::kString:
      FERRY_RETURN_IF_ERROR(CheckValueString(v.as_string(), path));
      return LengthField(kString, v.as_string().size());
    case Value::Kind::kBytes:
      return LengthField(kBytes, v.as_bytes().data.size());
    case Value::Kind::kTensor:
      return LengthField(kTensor, TensorBody(v.as_tensor()));
    case Value::Kind::kRRef: {
      absl::StatusOr<proto::RRefHandle> h = codec_->Encode(v.as_rref());
      if (!h.ok()) return Annotate(h.status(), path);
      rrefs_.push_back(h->SerializeAsString());
      return LengthField(kRRef, rrefs_.back().size());
    }
    case Value::Kind::kList:
    case Value::Kind::kMap:
      break;
  }
  if (depth >= kMaxValueDepth) return ValueDepthError(path);
  size_t slot = sizes_.size();
  sizes_.push_back(0);  // The container's body, filled below.
  size_t body = 0;
  if (v.is_list()) {
    for (size_t i = 0; i < v.as_list().size(); ++i) {
      FERRY_ASSIGN_OR_RETURN(
          size_t item,
          Size(v.as_list()[i], depth + 1, absl::StrCat(path, "[", i, "]")));
      body += LengthField(1, item);
    }
  } else {
    for (const auto& [key, item] : v.as_map()) {
      FERRY_RETURN_IF_ERROR(CheckValueString(key, path));
      size_t entry_slot = sizes_.size();
      sizes_.push_back(0);
      FERRY_ASSIGN_OR_RETURN(
          size_t value, Size(item, depth + 1, absl::StrCat(path, ".", key)));
      size_t entry = LengthField(1, key.size()) + LengthField(2, value);
      sizes_[entry_slot] = entry;
      body += LengthField(1, entry);
    }
  }
  sizes_[slot] = body;
  return LengthField(v.is_list() ? kList : kMap, body);
}

absl::StatusOr<size_t> ValueEncoder::Size(const Value& v, int depth,
                                          const std::string& path) {
  size_t slot = sizes_.size();
  sizes_.push_back(0);  // This Value message's body.
  FERRY_ASSIGN_OR_RETURN(size_t body, Body(v, depth, path));
  sizes_[slot] = body;
  return body;
}

void ValueEncoder::WriteTensor(const Tensor& t, WireWriter* w) {
  w->Key(kTensor, kLength);
  w->Varint(TensorBody(t));
  w->Key(kDType, kVarint);
  w->Varint(static_cast<int>(t.dtype()));
  if (t.rank() > 0) {
    size_t packed = 0;
    for (int64_t d : t.shape())
      packed += WireWriter::VarintSize(static_cast<uint64_t>(d));
    w->Key(kShape, kLength);
    w->Varint(packed);
    for (int64_t d : t.shape()) w->Varint(static_cast<uint64_t>(d));
  }
  if (t.nbytes() > 0) {
    w->Key(kData, kLength);
    w->Varint(t.nbytes());
    w->Alias(t.bytes(), t.buffer());
  }
}

void ValueEncoder::Write(const Value& v, WireWriter* w) {
  ++next_size_;  // This Value's body length was written by the caller.
  auto length_delimited = [&](int field, absl::string_view bytes) {
    w->Key(field, kLength);
    w->Varint(bytes.size());
    w->Copy(bytes);
  };
  switch (v.kind()) {
    case Value::Kind::kNull:
      return;
    case Value::Kind::kBool:
      w->Key(kBool, kVarint);
      w->Varint(v.as_bool() ? 1 : 0);
      return;
    case Value::Kind::kInt:
      w->Key(kInt, kVarint);
      w->Varint(static_cast<uint64_t>(v.as_int()));
      return;
    case Value::Kind::kDouble: {
      uint64_t bits;
      double d = v.as_double();
      std::memcpy(&bits, &d, sizeof(bits));
      w->Key(kDouble, kFixed64);
      w->Fixed64(bits);
      return;
    }
    case Value::Kind::kString:
      length_delimited(kString, v.as_string());
      return;
    case Value::Kind::kBytes:
      length_delimited(kBytes, v.as_bytes().data);
      return;
    case Value::Kind::kTensor:
      WriteTensor(v.as_tensor(), w);
      return;
    case Value::Kind::kRRef:
      length_delimited(kRRef, rrefs_[next_rref_++]);
      return;
    case Value::Kind::kList:
    case Value::Kind::kMap:
      break;
  }
  w->Key(v.is_list() ? kList : kMap, kLength);
  w->Varint(sizes_[next_size_++]);
  if (v.is_list()) {
    for (const Value& item : v.as_list()) {
      w->Key(1, kLength);
      w->Varint(sizes_[next_size_]);
      Write(item, w);
    }
    return;
  }
  for (const auto& [key, item] : v.as_map()) {
    w->Key(1, kLength);
    w->Varint(sizes_[next_size_++]);  // The entry.
    length_delimited(1, key);
    w->Key(2, kLength);
    w->Varint(sizes_[next_size_]);
    Write(item, w);
  }
}

}  // namespace

size_t WireWriter::VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void WireWriter::Varint(uint64_t v) {
  while (v >= 0x80) {
    pending_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  pending_.push_back(static_cast<char>(v));
}

void WireWriter::Fixed64(uint64_t v) {
  for (int i = 0; i < 8; ++i)
    pending_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void WireWriter::Flush() {
  if (pending_.empty()) return;
  slices_.emplace_back(pending_.data(), pending_.size());  // Copies.
  pending_.clear();
}

void WireWriter::Alias(absl::string_view bytes,
                       std::shared_ptr<const void> owner) {
  if (bytes.size() < kAliasMin) {
    Copy(bytes);
    return;
  }
  Flush();
  auto* keep = new std::shared_ptr<const void>(std::move(owner));
  slices_.emplace_back(const_cast<char*>(bytes.data()), bytes.size(),
                       DestroyOwner, keep);
}

grpc::ByteBuffer WireWriter::Finish() {
  Flush();
  return grpc::ByteBuffer(slices_.data(), slices_.size());
}

absl::StatusOr<grpc::ByteBuffer> EncodeValue(const Value& value,
                                             RRefCodec* codec,
                                             absl::string_view path) {
  ValueEncoder encoder(codec);
  FERRY_RETURN_IF_ERROR(encoder.Size(value, 0, std::string(path)).status());
  WireWriter w;
  encoder.Write(value, &w);
  return w.Finish();
}

absl::StatusOr<grpc::ByteBuffer> EncodeCallRequest(
    const proto::CallRequest& header, const std::vector<Value>& args,
    RRefCodec* codec, const Value& kwargs) {
  ValueEncoder encoder(codec);
  std::vector<size_t> arg_sizes;
  arg_sizes.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(
        size_t n, encoder.Size(args[i], 0, absl::StrCat("args[", i, "]")));
    arg_sizes.push_back(n);
  }
  // Sized after the arguments: the encoder writes in the order it sized.
  const bool keywords = kwargs.is_map() && !kwargs.as_map().empty();
  size_t kwargs_size = 0;
  if (keywords) {
    FERRY_ASSIGN_OR_RETURN(kwargs_size, encoder.Size(kwargs, 0, "kwargs"));
  }
  WireWriter w;
  // The scalar fields go through protobuf; field order does not matter.
  w.Message(header);
  for (size_t i = 0; i < args.size(); ++i) {
    w.Key(kCallArgs, kLength);
    w.Varint(arg_sizes[i]);
    encoder.Write(args[i], &w);
  }
  if (keywords) {
    w.Key(kCallKwargs, kLength);
    w.Varint(kwargs_size);
    encoder.Write(kwargs, &w);
  }
  return w.Finish();
}

absl::StatusOr<grpc::ByteBuffer> EncodeCallResponse(const Value& result,
                                                    RRefCodec* codec) {
  ValueEncoder encoder(codec);
  FERRY_ASSIGN_OR_RETURN(size_t size, encoder.Size(result, 0, "result"));
  WireWriter w;
  w.Key(kResponseResult, kLength);
  w.Varint(size);
  encoder.Write(result, &w);
  return w.Finish();
}

}  // namespace ferry
