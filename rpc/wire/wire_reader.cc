#include "rpc/wire/wire_reader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "proto/worker.pb.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/base/trace_binary.h"
#include "rpc/value/dtype.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/utf8.h"
#include "rpc/wire/bounded_parse.h"
#include "rpc/wire/wire_cursor.h"

namespace ferry {

namespace {

using WireType = WireCursor::WireType;
constexpr WireType kVarint = WireType::WIRETYPE_VARINT;
constexpr WireType kFixed64 = WireType::WIRETYPE_FIXED64;
constexpr WireType kLength = WireType::WIRETYPE_LENGTH_DELIMITED;

// Field numbers, from the generated code.
using PV = proto::Value;
using PT = proto::Tensor;
using PC = proto::CallRequest;
// A map entry's key and value (protobuf's layout of every map).
constexpr int kMapKey = 1;
constexpr int kMapValue = 2;

// The tags this reader acts on.
constexpr WireCursor::Tag kListItemTag =
    WireCursor::MakeTag(proto::ValueList::kItemsFieldNumber, kLength);
constexpr WireCursor::Tag kMapEntryTag =
    WireCursor::MakeTag(proto::ValueMap::kEntriesFieldNumber, kLength);
constexpr WireCursor::Tag kMapKeyTag = WireCursor::MakeTag(kMapKey, kLength);
constexpr WireCursor::Tag kMapValueTag =
    WireCursor::MakeTag(kMapValue, kLength);
constexpr WireCursor::Tag kDTypeTag =
    WireCursor::MakeTag(PT::kDtypeFieldNumber, kVarint);
constexpr WireCursor::Tag kShapeTag =
    WireCursor::MakeTag(PT::kShapeFieldNumber, kVarint);
constexpr WireCursor::Tag kPackedShapeTag =
    WireCursor::MakeTag(PT::kShapeFieldNumber, kLength);
constexpr WireCursor::Tag kDataTag =
    WireCursor::MakeTag(PT::kDataFieldNumber, kLength);
constexpr WireCursor::Tag kResultTag =
    WireCursor::MakeTag(proto::CallResponse::kResultFieldNumber, kLength);

// Tensors at least this long may reference the received bytes (smaller
// ones are copied, so they never keep a whole message alive).
constexpr uint64_t kAliasMin = 4096;

using Path = WirePath;

// CheckValueString, the path rendered only for the error (every string of
// every message is checked).
absl::Status CheckString(absl::string_view text, const Path& path) {
  if (IsValidUtf8(text)) return absl::OkStatus();
  return CheckValueString(text, path.Render());
}

absl::Status Malformed(const Path& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path.Render(), ": malformed message (", what, ")"));
}

// The error for a cursor whose read failed: what it met, where.
absl::Status Broken(const WireCursor& in, const Path& path) {
  return Malformed(path, in.what());
}

// A tensor as its fields arrive (fields may come in any order, and a
// repeated tensor field merges into it, as protobuf does).
struct PendingTensor {
  int32_t dtype = 0;
  Shape shape;
  WireBytes data;  // Empty if the data field is absent.
};

// A Value message as its fields arrive: the oneof member set last wins.
struct PendingValue {
  int field = 0;  // The Value field set last (0: none, null).
  Value value;    // Scalars, strings, bytes, lists, maps.
  PendingTensor tensor;
  proto::RRefHandle rref;
};

WireType WireTypeOf(int value_field) {
  switch (value_field) {
    case PV::kBoolValueFieldNumber:
    case PV::kIntValueFieldNumber:
      return kVarint;
    case PV::kDoubleValueFieldNumber:
      return kFixed64;
    default:
      return kLength;
  }
}

// The empty tensors' bytes: one shared, never-freed buffer.
std::shared_ptr<const char> EmptyBytes() {
  static const auto* empty =
      new std::shared_ptr<const char>(std::make_shared<const char>('\0'));
  return *empty;
}

// Parses the Values of one message against one Limits budget.
class ValueParser {
 public:
  ValueParser(WireCursor* in, const Limits& limits, RRefCodec* codec,
              TensorLanding* landing = nullptr, bool landed = false)
      : in_(in),
        limits_(limits),
        codec_(codec),
        landing_(landing),
        landed_(landed) {}

  // Reads the Value message that fills the cursor's limit into `out`.
  absl::Status Message(int depth, const Path& path, PendingValue* out);
  // Reads the length-delimited Value message at the cursor into `out`.
  absl::Status Nested(int depth, const Path& path, PendingValue* out);
  // The value `pending` describes.
  absl::StatusOr<Value> Finish(PendingValue* pending, const Path& path);

  // A string or bytes field of `len` bytes (its length read), within
  // --max_string_mb.
  absl::Status ReadString(uint64_t len, const Path& path, std::string* out);

 private:
  absl::Status Body(int depth, const Path& path, PendingValue* out);
  absl::Status Field(int field, int depth, const Path& path, PendingValue* out);
  // The entries (`tag`) of the list or map the cursor is in;
  // RESOURCE_EXHAUSTED if more than the values left in the budget.
  absl::Status CountEntries(WireCursor::Tag tag, const Path& path,
                            int64_t* count);
  absl::Status List(int depth, const Path& path, Value::List* out);
  absl::Status Map(int depth, const Path& path, Value::Map* out);
  absl::Status MapEntry(int depth, const Path& path, Value::Map* out);
  absl::Status TensorFields(const Path& path, PendingTensor* out);
  absl::Status ShapeDim(uint64_t dim, const Path& path, Shape* shape);
  absl::Status RRefField(uint64_t len, const Path& path, PendingValue* out);
  absl::StatusOr<Tensor> FinishTensor(PendingTensor* t, const Path& path);
  absl::Status CheckDims(const Shape& shape, const Path& path) const;
  absl::StatusOr<Tensor> TensorBytes(DType dtype, Shape shape,
                                     PendingTensor* t);
  absl::Status TakeItem(const Path& path);

  WireCursor* const in_;
  const Limits& limits_;
  RRefCodec* const codec_;
  // Where the first tensor met goes, if its size fits; null after it.
  TensorLanding* landing_;
  // The landing already holds the first tensor's bytes (it is one of the
  // slices read): that tensor must be exactly there.
  const bool landed_;
  int64_t items_ = 0;
};

absl::Status ValueParser::ReadString(uint64_t len, const Path& path,
                                     std::string* out) {
  if (len > static_cast<uint64_t>(limits_.max_string_bytes)) {
    return OverLimit(
        absl::StrCat(path.Render(), ": a string of ", HumanBytes(len)),
        HumanBytes(limits_.max_string_bytes), "max_string_mb",
        limits_.max_string_bytes / Limits::kMiB);
  }
  out->resize(len);
  if (!in_->Copy(len, out->data())) return Broken(*in_, path);
  return absl::OkStatus();
}

absl::Status ValueParser::TakeItem(const Path& path) {
  if (items_ < limits_.max_items) {
    ++items_;
    return absl::OkStatus();
  }
  return OverLimit(absl::StrCat(path.Render(), ": more than ",
                                limits_.max_items, " values in one message"),
                   absl::StrCat(limits_.max_items, " values"), "max_items",
                   limits_.max_items);
}

absl::Status ValueParser::Message(int depth, const Path& path,
                                  PendingValue* out) {
  FERRY_RETURN_IF_ERROR(TakeItem(path));
  return Body(depth, path, out);
}

absl::Status ValueParser::Nested(int depth, const Path& path,
                                 PendingValue* out) {
  uint64_t outer;
  if (!in_->EnterLength(&outer)) return Broken(*in_, path);
  FERRY_RETURN_IF_ERROR(Message(depth, path, out));
  in_->Leave(outer);
  return absl::OkStatus();
}

absl::Status ValueParser::Body(int depth, const Path& path, PendingValue* out) {
  WireCursor::Tag tag;
  while (in_->ReadTag(&tag)) {
    const int field = WireCursor::FieldOf(tag);
    if (field > PV::kRrefFieldNumber ||
        WireCursor::TypeOf(tag) != WireTypeOf(field)) {
      if (!in_->SkipField(tag)) break;  // Unknown.
      continue;
    }
    if (out->field != field) {
      *out = PendingValue();  // Another oneof member: the old one goes.
      out->field = field;
    }
    FERRY_RETURN_IF_ERROR(Field(field, depth, path, out));
  }
  return in_->failed() ? Broken(*in_, path) : absl::OkStatus();
}

absl::Status ValueParser::Field(int field, int depth, const Path& path,
                                PendingValue* out) {
  uint64_t v = 0;
  switch (field) {
    case PV::kBoolValueFieldNumber:
    case PV::kIntValueFieldNumber:
      if (!in_->ReadVarint(&v)) return Broken(*in_, path);
      out->value = field == PV::kBoolValueFieldNumber
                       ? Value(v != 0)
                       : Value(static_cast<int64_t>(v));
      return absl::OkStatus();
    case PV::kDoubleValueFieldNumber: {
      if (!in_->ReadFixed64(&v)) return Broken(*in_, path);
      double d;
      std::memcpy(&d, &v, sizeof(d));
      out->value = Value(d);
      return absl::OkStatus();
    }
    case PV::kTensorFieldNumber:
      return TensorFields(path, &out->tensor);
    case PV::kListFieldNumber:
    case PV::kMapFieldNumber:
      if (depth >= kMaxValueDepth) return ValueDepthError(path.Render());
      if (field == PV::kListFieldNumber) {
        if (!out->value.is_list()) out->value = Value(Value::List());
        return List(depth, path, &out->value.as_list());
      }
      if (!out->value.is_map()) out->value = Value(Value::Map());
      return Map(depth, path, &out->value.as_map());
    default:
      break;
  }
  uint64_t len;
  if (!in_->ReadLength(&len)) return Broken(*in_, path);
  if (field == PV::kRrefFieldNumber) return RRefField(len, path, out);
  std::string text;
  FERRY_RETURN_IF_ERROR(ReadString(len, path, &text));
  if (field == PV::kBytesValueFieldNumber) {
    out->value = Value(Bytes{std::move(text)});
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckString(text, path));
  out->value = Value(std::move(text));
  return absl::OkStatus();
}

// An RRef handle: generated code parses it, behind the bounded check
// (rpc/wire/bounded_parse.h); a repeated field merges, as protobuf does.
absl::Status ValueParser::RRefField(uint64_t len, const Path& path,
                                    PendingValue* out) {
  std::string bytes;
  FERRY_RETURN_IF_ERROR(ReadString(len, path, &bytes));
  proto::RRefHandle handle;
  FERRY_RETURN_IF_ERROR(BoundedParse(bytes, limits_, path.Render(), &handle));
  out->rref.MergeFrom(handle);
  return absl::OkStatus();
}

absl::Status ValueParser::CountEntries(WireCursor::Tag entry, const Path& path,
                                       int64_t* count) {
  // A copy of the cursor walks the entries (skipping their bodies), so a
  // list or map of more values than the budget allows fails before any is
  // built, and a list is allocated once.
  WireCursor scan = *in_;
  *count = 0;
  const int64_t budget = limits_.max_items - items_;
  // Stops one past the budget: the walk costs at most what building would.
  WireCursor::Tag tag;
  while (*count <= budget && scan.ReadTag(&tag)) {
    if (tag == entry) ++*count;
    if (!scan.SkipField(tag)) break;
  }
  if (scan.failed()) return Broken(scan, path);
  if (*count > budget) {
    return OverLimit(absl::StrCat(path.Render(), ": more than ",
                                  limits_.max_items, " values in one message"),
                     absl::StrCat(limits_.max_items, " values"), "max_items",
                     limits_.max_items);
  }
  return absl::OkStatus();
}

absl::Status ValueParser::List(int depth, const Path& path, Value::List* out) {
  uint64_t outer;
  if (!in_->EnterLength(&outer)) return Broken(*in_, path);
  int64_t count = 0;
  FERRY_RETURN_IF_ERROR(CountEntries(kListItemTag, path, &count));
  out->reserve(out->size() + static_cast<size_t>(count));
  WireCursor::Tag tag;
  while (in_->ReadTag(&tag)) {
    if (tag != kListItemTag) {
      if (!in_->SkipField(tag)) break;
      continue;
    }
    const Path item = path.Item(static_cast<int64_t>(out->size()));
    PendingValue pending;
    FERRY_RETURN_IF_ERROR(Nested(depth + 1, item, &pending));
    FERRY_ASSIGN_OR_RETURN(Value v, Finish(&pending, item));
    out->push_back(std::move(v));
  }
  if (in_->failed()) return Broken(*in_, path);
  in_->Leave(outer);
  return absl::OkStatus();
}

absl::Status ValueParser::Map(int depth, const Path& path, Value::Map* out) {
  uint64_t outer;
  if (!in_->EnterLength(&outer)) return Broken(*in_, path);
  int64_t count = 0;
  FERRY_RETURN_IF_ERROR(CountEntries(kMapEntryTag, path, &count));
  WireCursor::Tag tag;
  while (in_->ReadTag(&tag)) {
    if (tag != kMapEntryTag) {
      if (!in_->SkipField(tag)) break;
      continue;
    }
    uint64_t entry_end;
    if (!in_->EnterLength(&entry_end)) break;
    FERRY_RETURN_IF_ERROR(MapEntry(depth, path, out));
    in_->Leave(entry_end);
  }
  if (in_->failed()) return Broken(*in_, path);
  in_->Leave(outer);
  return absl::OkStatus();
}

// One map entry: key = 1 (string), value = 2 (Value); a later duplicate
// key replaces an earlier one, as protobuf's maps do.
absl::Status ValueParser::MapEntry(int depth, const Path& path,
                                   Value::Map* out) {
  std::string key;
  PendingValue value;
  bool has_value = false;
  WireCursor::Tag tag;
  while (in_->ReadTag(&tag)) {
    if (tag == kMapKeyTag) {
      uint64_t len;
      if (!in_->ReadLength(&len)) break;
      FERRY_RETURN_IF_ERROR(ReadString(len, path, &key));
      FERRY_RETURN_IF_ERROR(CheckString(key, path));
    } else if (tag == kMapValueTag) {
      FERRY_RETURN_IF_ERROR(Nested(depth + 1, path.Key(key), &value));
      has_value = true;
    } else if (!in_->SkipField(tag)) {
      break;
    }
  }
  if (in_->failed()) return Broken(*in_, path);
  if (!has_value) FERRY_RETURN_IF_ERROR(TakeItem(path.Key(key)));
  const Path at = path.Key(key);
  FERRY_ASSIGN_OR_RETURN(Value v, Finish(&value, at));
  out->insert_or_assign(std::move(key), std::move(v));
  return absl::OkStatus();
}

absl::Status ValueParser::ShapeDim(uint64_t dim, const Path& path,
                                   Shape* shape) {
  if (static_cast<int64_t>(shape->size()) >= limits_.max_tensor_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.Field("shape").Render(), ": rank ", shape->size() + 1,
                     " or more is ",
                     LimitNote(absl::StrCat(limits_.max_tensor_rank),
                               "max_tensor_rank", limits_.max_tensor_rank)));
  }
  shape->push_back(static_cast<int64_t>(dim));
  return absl::OkStatus();
}

// Tensor fields: dtype, shape (packed or not), data. The data is only
// located here; its bytes are taken once the shape is checked.
absl::Status ValueParser::TensorFields(const Path& path, PendingTensor* out) {
  uint64_t outer;
  if (!in_->EnterLength(&outer)) return Broken(*in_, path);
  WireCursor::Tag tag;
  uint64_t v, n;
  while (in_->ReadTag(&tag)) {
    if (tag == kDTypeTag) {
      if (in_->ReadVarint(&v)) out->dtype = static_cast<int32_t>(v);
    } else if (tag == kShapeTag) {
      if (in_->ReadVarint(&v)) {
        FERRY_RETURN_IF_ERROR(ShapeDim(v, path, &out->shape));
      }
    } else if (tag == kPackedShapeTag) {
      uint64_t packed_end;
      if (!in_->EnterLength(&packed_end)) break;
      while (in_->left() > 0 && in_->ReadVarint(&v)) {
        FERRY_RETURN_IF_ERROR(ShapeDim(v, path, &out->shape));
      }
      in_->Leave(packed_end);
    } else if (tag == kDataTag) {
      if (in_->ReadLength(&n)) in_->Take(n, &out->data);
    } else {
      in_->SkipField(tag);
    }
  }
  if (in_->failed()) return Broken(*in_, path);
  in_->Leave(outer);
  return absl::OkStatus();
}

absl::Status ValueParser::CheckDims(const Shape& shape,
                                    const Path& path) const {
  const int64_t max_dim = limits_.max_tensor_dim;
  auto note = [max_dim] {
    return LimitNote(absl::StrCat(max_dim), "max_tensor_dim", max_dim);
  };
  int64_t extent = 1;  // Product of the non-zero dims.
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path.Field("shape").Item(i).Render(), ": negative dimension ", d));
    }
    if (d > max_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.Field("shape").Item(i).Render(), ": dimension ", d,
                       " is ", note()));
    }
    if (d == 0) continue;
    if (extent > max_dim / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.Field("shape").Render(), ": ", ShapeString(shape),
                       " spans more than ", max_dim,
                       " elements (zero dimensions counted as 1), ", note()));
    }
    extent *= d;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ValueParser::FinishTensor(PendingTensor* t,
                                                 const Path& path) {
  if (!IsValidDType(t->dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.Field("dtype").Render(), ": unknown dtype ", t->dtype));
  }
  FERRY_RETURN_IF_ERROR(CheckDims(t->shape, path));
  const DType dtype = static_cast<DType>(t->dtype);
  absl::StatusOr<int64_t> numel = CheckedNumElements(t->shape, ItemSize(dtype));
  if (!numel.ok()) return Annotate(numel.status(), path.Render());
  const uint64_t expected = static_cast<uint64_t>(*numel) * ItemSize(dtype);
  const uint64_t got = t->data.size();
  if (got != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.Render(), ": data: ", got, " bytes, but ", DTypeName(dtype),
        " shape ", ShapeString(t->shape), " needs ", *numel, " x ",
        ItemSize(dtype), " = ", expected));
  }
  absl::StatusOr<Tensor> tensor = TensorBytes(dtype, std::move(t->shape), t);
  if (!tensor.ok()) return Annotate(tensor.status(), path.Render());
  return tensor;
}

// The tensor's bytes: into the landing offered for them; else a reference
// to the received slice when they lie in one, aligned for the dtype; else
// one copy.
absl::StatusOr<Tensor> ValueParser::TensorBytes(DType dtype, Shape shape,
                                                PendingTensor* t) {
  const uint64_t n = t->data.size();
  const grpc::Slice* slice = nullptr;
  if (landing_ != nullptr && landed_) {
    TensorLanding* at = std::exchange(landing_, nullptr);
    if (n != at->nbytes || n == 0 || t->data.Contiguous(&slice) != at->data)
      return absl::InvalidArgumentError(
          "malformed message (the first tensor is not where its prefix put "
          "it)");
    return Tensor::FromShared(dtype, std::move(shape), at->owner, at->data, n);
  }
  if (landing_ != nullptr) {
    TensorLanding* at = std::exchange(landing_, nullptr);
    // A landing with a writer takes bytes only as they arrive.
    if (n == at->nbytes && n > 0 && at->writer == nullptr) {
      t->data.CopyTo(at->data);
      return Tensor::FromShared(dtype, std::move(shape), at->owner, at->data,
                                n);
    }
  }
  if (n == 0) {
    return Tensor::FromShared(dtype, std::move(shape), EmptyBytes(),
                              EmptyBytes().get(), 0);
  }
  const size_t align = std::min<size_t>(ItemSize(dtype), 8);
  const char* bytes = n >= kAliasMin ? t->data.Contiguous(&slice) : nullptr;
  if (bytes != nullptr && reinterpret_cast<uintptr_t>(bytes) % align == 0) {
    auto owner = std::make_shared<grpc::Slice>(*slice);  // A reference.
    return Tensor::FromShared(dtype, std::move(shape), std::move(owner), bytes,
                              n);
  }
  // One allocation for the bytes and their count.
  std::shared_ptr<char[]> copy = std::make_shared_for_overwrite<char[]>(n);
  t->data.CopyTo(copy.get());
  const char* data = copy.get();
  return Tensor::FromShared(dtype, std::move(shape), std::move(copy), data, n);
}

absl::StatusOr<Value> ValueParser::Finish(PendingValue* pending,
                                          const Path& path) {
  switch (pending->field) {
    case PV::kTensorFieldNumber: {
      FERRY_ASSIGN_OR_RETURN(Tensor t, FinishTensor(&pending->tensor, path));
      return Value(std::move(t));
    }
    case PV::kRrefFieldNumber: {
      if (codec_ == nullptr) {
        return Value(std::make_shared<const RRefBase>(
            DescriptorFromProto(pending->rref)));
      }
      absl::StatusOr<Value::RRefPtr> rref = codec_->Decode(pending->rref);
      if (!rref.ok()) return Annotate(rref.status(), path.Render());
      return Value(*std::move(rref));
    }
    default:
      return std::move(pending->value);
  }
}

// ---- Where the tensors' bytes lie, from a prefix of the message ----

// The fields of the message filling the cursor's limit: visit(field) for
// each length-delimited one, the cursor entered into it (what visit leaves
// unread is skipped); others are skipped. An error for malformed bytes; OK
// at the limit, or where the bytes end (the cursor then stays stopped
// kTruncated, so every enclosing walk ends too).
template <typename Visit>
absl::Status EachLengthField(WireCursor* in, const Path& path, Visit visit) {
  WireCursor::Tag tag;
  while (in->ReadTag(&tag)) {
    if (WireCursor::TypeOf(tag) != kLength) {
      if (!in->SkipField(tag)) break;
      continue;
    }
    uint64_t outer;
    if (!in->EnterLength(&outer)) break;
    FERRY_RETURN_IF_ERROR(visit(WireCursor::FieldOf(tag)));
    if (!in->SkipToLimit()) break;
    in->Leave(outer);
  }
  if (in->stop() == WireStop::kMalformed) return Broken(*in, path);
  return absl::OkStatus();
}

// Depth first through the Value message filling the cursor's limit: the
// tensors' data fields, appended to `out` in order (each inside the fields
// that hold it, by the cursor's construction).
absl::Status FindTensors(WireCursor* in, int depth, const Path& path,
                         std::vector<TensorPlace>* out) {
  auto nested = [&](int wanted, const Path& at) {
    return [in, depth, out, wanted, &at](int field) {
      return field == wanted ? FindTensors(in, depth + 1, at, out)
                             : absl::OkStatus();
    };
  };
  return EachLengthField(in, path, [&](int field) -> absl::Status {
    switch (field) {
      case PV::kTensorFieldNumber: {
        const Path tensor = path.Field("tensor");
        return EachLengthField(in, tensor, [&](int f) {
          if (f == PT::kDataFieldNumber) {
            out->push_back(TensorPlace{in->position(), in->left()});
          }
          return absl::OkStatus();
        });
      }
      case PV::kListFieldNumber: {
        if (depth >= kMaxValueDepth) return ValueDepthError(path.Render());
        const Path item = path.Field("list");
        return EachLengthField(
            in, item, nested(proto::ValueList::kItemsFieldNumber, item));
      }
      case PV::kMapFieldNumber: {
        if (depth >= kMaxValueDepth) return ValueDepthError(path.Render());
        const Path entry = path.Field("map");
        return EachLengthField(in, entry, [&](int f) {
          return f == proto::ValueMap::kEntriesFieldNumber
                     ? EachLengthField(in, entry, nested(kMapValue, entry))
                     : absl::OkStatus();
        });
      }
      default:
        return absl::OkStatus();
    }
  });
}

// ---- Call requests ----

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  // Dump only fails on a buffer without bytes (an empty message).
  (void)bytes.Dump(&slices);
  return slices;
}

// The header of a CallRequest, and each argument: a cursor entered into
// it.
struct CallRequestScan {
  CallHeader header;
  // Inline for the common few (a call's scan allocates nothing here).
  absl::InlinedVector<WireCursor, 4> args;
  // Each kwargs field met (protobuf merges repeats): a cursor entered
  // into it.
  absl::InlinedVector<WireCursor, 1> kwargs;
  absl::Status args_error;
  // Skip the header's fields (Open() read them): only the args wanted.
  bool args_only = false;
};

// RESOURCE_EXHAUSTED: more arguments (positional and keyword) than
// --max_args.
absl::Status TooManyArgs(const Limits& limits) {
  return OverLimit(
      absl::StrCat("args: more than ", limits.max_args, " arguments"),
      absl::StrCat(limits.max_args, " arguments"), "max_args", limits.max_args);
}

// A keyword a call may name: an identifier of at most kMaxKeywordBytes.
bool IsKeyword(absl::string_view key) {
  if (key.empty() || key.size() > kMaxKeywordBytes) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// A trace context of `len` bytes at `in`: read into `h` if it is one (on
// the stack: every call has one), skipped if not (a new trace, as W3C
// asks of a receiver that cannot read its caller's).
absl::Status ScanTrace(uint64_t len, const Path& at, WireCursor* in,
                       CallHeader* h) {
  if (len != kTraceparentBinarySize) {
    return in->Skip(len) ? absl::OkStatus() : Broken(*in, at);
  }
  char bytes[kTraceparentBinarySize];
  if (!in->Copy(len, bytes)) return Broken(*in, at);
  h->trace = ParseTraceparentBinary(absl::string_view(bytes, len));
  return absl::OkStatus();
}

absl::Status ScanCallField(WireCursor::Tag tag, ValueParser* parser,
                           WireCursor* in, const Limits& limits,
                           CallRequestScan* scan) {
  static const Path kRoot{nullptr, "request", -1};
  const int field = WireCursor::FieldOf(tag);
  CallHeader& h = scan->header;
  if (tag == WireCursor::MakeTag(PC::kCallerNodeFieldNumber, kVarint)) {
    if (!in->ReadVarint(&h.caller_node)) {
      return Broken(*in, kRoot.Field("caller_node"));
    }
    return absl::OkStatus();
  }
  const bool value_field =
      field == PC::kArgsFieldNumber || field == PC::kKwargsFieldNumber;
  if (WireCursor::TypeOf(tag) != kLength || (scan->args_only && !value_field) ||
      (!value_field && field != PC::kFunctionFieldNumber &&
       field != PC::kCreateRrefFieldNumber &&
       field != PC::kTraceContextFieldNumber)) {
    return in->SkipField(tag) ? absl::OkStatus() : Broken(*in, kRoot);
  }
  const Path at =
      kRoot.Field(field == PC::kFunctionFieldNumber       ? "function"
                  : field == PC::kArgsFieldNumber         ? "args"
                  : field == PC::kKwargsFieldNumber       ? "kwargs"
                  : field == PC::kTraceContextFieldNumber ? "trace_context"
                                                          : "create_rref");
  if (value_field) {
    if (field == PC::kArgsFieldNumber &&
        static_cast<int64_t>(scan->args.size()) >= limits.max_args) {
      scan->args_error = TooManyArgs(limits);
      return absl::OkStatus();
    }
    // Past one field a call needs, repeats only merge: bounded so a
    // message of empty kwargs fields costs no cursor each.
    if (field == PC::kKwargsFieldNumber &&
        static_cast<int64_t>(scan->kwargs.size()) >= limits.max_args) {
      scan->args_error = TooManyArgs(limits);
      return absl::OkStatus();
    }
    uint64_t outer;
    if (!in->EnterLength(&outer)) return Broken(*in, at);
    if (field == PC::kArgsFieldNumber) {
      scan->args.push_back(*in);
    } else {
      scan->kwargs.push_back(*in);
      h.kwargs = true;
    }
    if (!in->SkipToLimit()) return Broken(*in, at);
    in->Leave(outer);
    return absl::OkStatus();
  }
  uint64_t len;
  if (!in->ReadLength(&len)) return Broken(*in, at);
  if (field == PC::kTraceContextFieldNumber) return ScanTrace(len, at, in, &h);
  std::string text;
  FERRY_RETURN_IF_ERROR(parser->ReadString(len, at, &text));
  if (field == PC::kCreateRrefFieldNumber) {
    proto::RRefHandle handle;
    FERRY_RETURN_IF_ERROR(BoundedParse(text, limits, at.Render(), &handle));
    if (!h.create_rref) h.create_rref.emplace();
    h.create_rref->MergeFrom(handle);
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckString(text, at));
  h.function = std::move(text);
  return absl::OkStatus();
}

absl::Status ScanCallRequest(WireCursor in, const Limits& limits,
                             CallRequestScan* scan) {
  ValueParser parser(&in, limits, nullptr);
  // Stops at the first argument past --max_args: nothing after it is
  // needed to refuse the call.
  WireCursor::Tag tag;
  while (scan->args_error.ok() && in.ReadTag(&tag)) {
    FERRY_RETURN_IF_ERROR(ScanCallField(tag, &parser, &in, limits, scan));
  }
  if (in.failed()) return Broken(in, Path{nullptr, "request", -1});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CallRequestReader> CallRequestReader::Open(
    const grpc::ByteBuffer& bytes, const Limits& limits) {
  CallRequestReader reader(SlicesOf(bytes), limits);
  // The scan's cursors point into reader.slices_, a vector whose buffer
  // stays put when the reader is moved; Args() re-creates them anyway.
  CallRequestScan scan;
  FERRY_RETURN_IF_ERROR(
      ScanCallRequest(WireCursor(&reader.slices_), limits, &scan));
  reader.header_ = std::move(scan.header);
  reader.args_error_ = scan.args_error;
  return reader;
}

absl::StatusOr<std::vector<Value>> CallRequestReader::Args(RRefCodec* codec,
                                                           Value::Map* kwargs) {
  FERRY_RETURN_IF_ERROR(args_error_);
  if (header_.kwargs && kwargs == nullptr) {
    return absl::InvalidArgumentError(
        "kwargs: keyword arguments are not taken here");
  }
  CallRequestScan scan{.args_only = true};
  FERRY_RETURN_IF_ERROR(ScanCallRequest(WireCursor(&slices_), limits_, &scan));
  std::vector<Value> args;
  args.reserve(scan.args.size());
  // One parser for every argument: --max_items counts the whole message.
  WireCursor in;
  ValueParser parser(&in, limits_, codec);
  for (size_t i = 0; i < scan.args.size(); ++i) {
    in = scan.args[i];
    const Path path{nullptr, "args", static_cast<int64_t>(i)};
    PendingValue pending;
    FERRY_RETURN_IF_ERROR(parser.Message(0, path, &pending));
    FERRY_ASSIGN_OR_RETURN(Value v, parser.Finish(&pending, path));
    args.push_back(std::move(v));
  }
  for (const WireCursor& at : scan.kwargs) {
    in = at;
    const Path path{nullptr, "kwargs", -1};
    PendingValue pending;
    FERRY_RETURN_IF_ERROR(parser.Message(0, path, &pending));
    FERRY_ASSIGN_OR_RETURN(Value v, parser.Finish(&pending, path));
    if (v.is_null()) continue;  // An empty map: no keyword.
    if (!v.is_map()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kwargs: expected a map of keyword arguments, got ", v.kind_name()));
    }
    for (auto& [key, value] : v.as_map()) {
      if (!IsKeyword(key)) {
        // Shown escaped, and cut: the key is the caller's.
        constexpr size_t kShown = 64;
        return absl::InvalidArgumentError(absl::StrCat(
            "kwargs: \"", absl::CHexEscape(key.substr(0, kShown)),
            key.size() > kShown ? "..." : "", "\" (", key.size(),
            " bytes) is not a keyword (a name [A-Za-z_][A-Za-z0-9_]* of at "
            "most ",
            kMaxKeywordBytes, " bytes)"));
      }
      kwargs->insert_or_assign(key, std::move(value));
    }
  }
  if (kwargs != nullptr &&
      static_cast<int64_t>(args.size() + kwargs->size()) > limits_.max_args) {
    return TooManyArgs(limits_);
  }
  return args;
}

absl::StatusOr<Value> ReadValue(const std::vector<grpc::Slice>& slices,
                                const Limits& limits, absl::string_view path,
                                TensorLanding* landing, bool landed) {
  WireCursor in(&slices);
  ValueParser parser(&in, limits, nullptr, landing, landed);
  const Path root{nullptr, path, -1};
  PendingValue pending;
  FERRY_RETURN_IF_ERROR(parser.Message(0, root, &pending));
  return parser.Finish(&pending, root);
}

absl::StatusOr<std::vector<TensorPlace>> FindTensorData(
    const std::vector<grpc::Slice>& slices, uint64_t total) {
  WireCursor in(&slices, total);
  std::vector<TensorPlace> places;
  FERRY_RETURN_IF_ERROR(
      FindTensors(&in, 0, Path{nullptr, "message", -1}, &places));
  return places;
}

absl::StatusOr<Value> ReadCallResponse(const grpc::ByteBuffer& bytes,
                                       const Limits& limits, RRefCodec* codec) {
  std::vector<grpc::Slice> slices = SlicesOf(bytes);
  WireCursor in(&slices);
  ValueParser parser(&in, limits, codec);
  const Path path{nullptr, "result", -1};
  PendingValue pending;
  WireCursor::Tag tag;
  while (in.ReadTag(&tag)) {
    if (tag != kResultTag) {
      if (!in.SkipField(tag)) break;
      continue;
    }
    // A repeated result field merges into one value, as protobuf does.
    FERRY_RETURN_IF_ERROR(parser.Nested(0, path, &pending));
  }
  if (in.failed()) return Broken(in, path);
  return parser.Finish(&pending, path);
}

}  // namespace ferry
