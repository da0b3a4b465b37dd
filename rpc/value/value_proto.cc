#include "rpc/value/value_proto.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/utf8.h"

namespace ferry {

void TensorToProto(const Tensor& tensor, proto::Tensor* out) {
  out->set_dtype(static_cast<proto::DType>(tensor.dtype()));
  out->mutable_shape()->Assign(tensor.shape().begin(), tensor.shape().end());
  out->set_data(tensor.data(), tensor.nbytes());
}

absl::StatusOr<Tensor> TensorFromProto(proto::Tensor* in,
                                       absl::string_view path,
                                       const Limits& limits) {
  if (!IsValidDType(in->dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ".dtype: unknown dtype ", static_cast<int>(in->dtype())));
  }
  const DType dtype = static_cast<DType>(in->dtype());
  absl::Span<const int64_t> dims(in->shape().data(), in->shape().size());
  // The shape is checked before anything is sized from it.
  absl::Status shape_ok = CheckShape(dims, dtype, limits, path).status();
  if (!shape_ok.ok()) return shape_ok;
  absl::StatusOr<Tensor> t = Tensor::FromBytes(
      dtype, Shape(dims.begin(), dims.end()), std::move(*in->mutable_data()));
  if (!t.ok()) return Annotate(t.status(), path);
  return t;
}

proto::RRefHandle DescriptorToProto(const RRefDescriptor& d) {
  proto::RRefHandle h;
  h.set_rref_creator(d.rref_id.node);
  h.set_rref_local(d.rref_id.local);
  h.set_fork_creator(d.fork_id.node);
  h.set_fork_local(d.fork_id.local);
  h.set_owner(d.owner);
  h.set_owner_rank(d.owner_rank);
  return h;
}

RRefDescriptor DescriptorFromProto(const proto::RRefHandle& h) {
  RRefDescriptor d;
  d.rref_id = {h.rref_creator(), h.rref_local()};
  d.fork_id = {h.fork_creator(), h.fork_local()};
  d.owner = h.owner();
  d.owner_rank = h.owner_rank();
  return d;
}

// A list or map at depth kMaxValueDepth would make the value nest deeper
// than the limit (a scalar is depth 0, [x] depth 1).
absl::Status ValueDepthError(absl::string_view path) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": nesting deeper than ", kMaxValueDepth, " levels"));
}

absl::Status CheckValueString(absl::string_view text, absl::string_view path) {
  if (IsValidUtf8(text)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": string is not valid UTF-8 (send bytes instead)"));
}

namespace {

absl::Status Encode(const Value& value, proto::Value* out, RRefCodec* codec,
                    int depth, const std::string& path) {
  if ((value.is_list() || value.is_map()) && depth >= kMaxValueDepth) {
    return ValueDepthError(path);
  }
  switch (value.kind()) {
    case Value::Kind::kNull:
      out->Clear();
      return absl::OkStatus();
    case Value::Kind::kBool:
      out->set_bool_value(value.as_bool());
      return absl::OkStatus();
    case Value::Kind::kInt:
      out->set_int_value(value.as_int());
      return absl::OkStatus();
    case Value::Kind::kDouble:
      out->set_double_value(value.as_double());
      return absl::OkStatus();
    case Value::Kind::kString:
      FERRY_RETURN_IF_ERROR(CheckValueString(value.as_string(), path));
      out->set_string_value(value.as_string());
      return absl::OkStatus();
    case Value::Kind::kBytes:
      out->set_bytes_value(value.as_bytes().data);
      return absl::OkStatus();
    case Value::Kind::kTensor:
      TensorToProto(value.as_tensor(), out->mutable_tensor());
      return absl::OkStatus();
    case Value::Kind::kList: {
      proto::ValueList* list = out->mutable_list();
      const Value::List& items = value.as_list();
      list->mutable_items()->Reserve(static_cast<int>(items.size()));
      for (size_t i = 0; i < items.size(); ++i) {
        FERRY_RETURN_IF_ERROR(Encode(items[i], list->add_items(), codec,
                                     depth + 1,
                                     absl::StrCat(path, "[", i, "]")));
      }
      return absl::OkStatus();
    }
    case Value::Kind::kMap: {
      auto* entries = out->mutable_map()->mutable_entries();
      for (const auto& [key, item] : value.as_map()) {
        FERRY_RETURN_IF_ERROR(CheckValueString(key, path));
        FERRY_RETURN_IF_ERROR(Encode(item, &(*entries)[key], codec, depth + 1,
                                     absl::StrCat(path, ".", key)));
      }
      return absl::OkStatus();
    }
    case Value::Kind::kRRef: {
      if (codec == nullptr) {
        *out->mutable_rref() = DescriptorToProto(value.as_rref()->descriptor());
        return absl::OkStatus();
      }
      absl::StatusOr<proto::RRefHandle> handle = codec->Encode(value.as_rref());
      if (!handle.ok()) return Annotate(handle.status(), path);
      *out->mutable_rref() = *std::move(handle);
      return absl::OkStatus();
    }
  }
  return absl::InternalError(absl::StrCat(path, ": unknown value kind"));
}

}  // namespace

absl::Status ValueToProto(const Value& value, proto::Value* out,
                          RRefCodec* codec) {
  return Encode(value, out, codec, 0, "value");
}

absl::Status ValueDecoder::TakeItems(int64_t n, const std::string& path) {
  if (n <= limits_.max_items - items_) {
    items_ += n;
    return absl::OkStatus();
  }
  return OverLimit(absl::StrCat(path, ": more than ", limits_.max_items,
                                " values in one message"),
                   absl::StrCat(limits_.max_items, " values"), "max_items",
                   limits_.max_items);
}

absl::Status ValueDecoder::CheckSize(size_t bytes,
                                     const std::string& path) const {
  if (bytes <= static_cast<uint64_t>(limits_.max_string_bytes)) {
    return absl::OkStatus();
  }
  return OverLimit(absl::StrCat(path, ": a string of ", HumanBytes(bytes)),
                   HumanBytes(limits_.max_string_bytes), "max_string_mb",
                   limits_.max_string_bytes / Limits::kMiB);
}

absl::StatusOr<Value> ValueDecoder::Decode(proto::Value* in,
                                           absl::string_view path) {
  return DecodeAt(in, 0, std::string(path));
}

absl::StatusOr<Value> ValueDecoder::DecodeAt(proto::Value* in, int depth,
                                             const std::string& path) {
  FERRY_RETURN_IF_ERROR(TakeItems(1, path));
  switch (in->kind_case()) {
    case proto::Value::KIND_NOT_SET:
      return Value();
    case proto::Value::kBoolValue:
      return Value(in->bool_value());
    case proto::Value::kIntValue:
      return Value(in->int_value());
    case proto::Value::kDoubleValue:
      return Value(in->double_value());
    case proto::Value::kStringValue:
      FERRY_RETURN_IF_ERROR(CheckSize(in->string_value().size(), path));
      return Value(std::move(*in->mutable_string_value()));
    case proto::Value::kBytesValue:
      FERRY_RETURN_IF_ERROR(CheckSize(in->bytes_value().size(), path));
      return Value(Bytes{std::move(*in->mutable_bytes_value())});
    case proto::Value::kTensor: {
      FERRY_ASSIGN_OR_RETURN(
          Tensor t, TensorFromProto(in->mutable_tensor(), path, limits_));
      return Value(std::move(t));
    }
    case proto::Value::kList:
      if (depth >= kMaxValueDepth) return ValueDepthError(path);
      return DecodeList(in->mutable_list(), depth, path);
    case proto::Value::kMap:
      if (depth >= kMaxValueDepth) return ValueDepthError(path);
      return DecodeMap(in->mutable_map(), depth, path);
    case proto::Value::kRref: {
      if (codec_ == nullptr) {
        return Value(
            std::make_shared<const RRefBase>(DescriptorFromProto(in->rref())));
      }
      absl::StatusOr<Value::RRefPtr> rref = codec_->Decode(in->rref());
      if (!rref.ok()) return Annotate(rref.status(), path);
      return Value(*std::move(rref));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown value kind ", static_cast<int>(in->kind_case())));
}

absl::StatusOr<Value> ValueDecoder::DecodeList(proto::ValueList* in, int depth,
                                               const std::string& path) {
  auto* items = in->mutable_items();
  // Refused before anything is reserved for them.
  if (items->size() > limits_.max_items - items_) {
    FERRY_RETURN_IF_ERROR(TakeItems(items->size(), path));
  }
  Value::List list;
  list.reserve(items->size());
  for (int i = 0; i < items->size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(Value v, DecodeAt(items->Mutable(i), depth + 1,
                                             absl::StrCat(path, "[", i, "]")));
    list.push_back(std::move(v));
  }
  return Value(std::move(list));
}

absl::StatusOr<Value> ValueDecoder::DecodeMap(proto::ValueMap* in, int depth,
                                              const std::string& path) {
  Value::Map map;
  for (auto& [key, item] : *in->mutable_entries()) {
    FERRY_RETURN_IF_ERROR(CheckSize(key.size(), absl::StrCat(path, " key")));
    std::string item_path = absl::StrCat(path, ".", key);
    FERRY_ASSIGN_OR_RETURN(Value v, DecodeAt(&item, depth + 1, item_path));
    map.emplace(key, std::move(v));
  }
  return Value(std::move(map));
}

absl::StatusOr<Value> ValueFromProto(proto::Value* in, absl::string_view path,
                                     RRefCodec* codec, const Limits& limits) {
  return ValueDecoder(limits, codec).Decode(in, path);
}

RRefCodec* LazyCodec::Real() {
  if (real_ == nullptr && factory_ != nullptr) real_ = factory_->ForPeer(peer_);
  return real_.get();
}

absl::StatusOr<proto::RRefHandle> LazyCodec::Encode(
    const Value::RRefPtr& rref) {
  if (RRefCodec* real = Real()) return real->Encode(rref);
  return DescriptorToProto(rref->descriptor());
}

absl::StatusOr<Value::RRefPtr> LazyCodec::Decode(
    const proto::RRefHandle& handle) {
  if (RRefCodec* real = Real()) return real->Decode(handle);
  return Value::RRefPtr(
      std::make_shared<const RRefBase>(DescriptorFromProto(handle)));
}

absl::StatusOr<Value> ValueFromProtoCopy(const proto::Value& in,
                                         absl::string_view path,
                                         RRefCodec* codec,
                                         const Limits& limits) {
  proto::Value copy = in;
  return ValueFromProto(&copy, path, codec, limits);
}

}  // namespace ferry
