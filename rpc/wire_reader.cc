#include "rpc/wire_reader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/value/dtype.h"
#include "rpc/value/tensor.h"
#include "rpc/value/utf8.h"

namespace ferry {

namespace {

constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLength = 2;
constexpr int kFixed32 = 5;

// Tensors at least this long may reference the received bytes (smaller
// ones are copied, so they never keep a whole message alive).
constexpr uint64_t kAliasMin = 4096;

// A read position in a message held as gRPC slices, bounded by the end of
// the (sub)message being read. Copies are cheap (a few words), so a
// position can be kept and returned to.
class Cursor {
 public:
  Cursor() = default;
  explicit Cursor(const std::vector<grpc::Slice>* slices) : slices_(slices) {
    for (const grpc::Slice& s : *slices) end_ += s.size();
  }

  bool done() const { return pos_ >= end_; }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return end_ - pos_; }

  bool Byte(uint8_t* b) {
    if (pos_ >= end_) return false;
    if (p_ == stop_) Next();
    *b = *p_++;
    ++pos_;
    return true;
  }

  // A base-128 varint of at most 10 bytes (bits past 64 dropped, as
  // protobuf does).
  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      result |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }

  bool Fixed(int bytes, uint64_t* v) {
    uint64_t result = 0;
    for (int i = 0; i < bytes; ++i) {
      uint8_t b;
      if (!Byte(&b)) return false;
      result |= uint64_t{b} << (8 * i);
    }
    *v = result;
    return true;
  }

  bool Skip(uint64_t n) {
    if (n > left()) return false;
    while (n > 0) {
      if (p_ == stop_) Next();
      uint64_t chunk = std::min<uint64_t>(n, stop_ - p_);
      p_ += chunk;
      pos_ += chunk;
      n -= chunk;
    }
    return true;
  }

  // Copies `n` bytes (n <= left()) to `out` and moves past them.
  void Copy(uint64_t n, char* out) {
    while (n > 0) {
      if (p_ == stop_) Next();
      uint64_t chunk = std::min<uint64_t>(n, stop_ - p_);
      std::memcpy(out, p_, chunk);
      out += chunk;
      p_ += chunk;
      pos_ += chunk;
      n -= chunk;
    }
  }

  // The next `n` bytes (0 < n <= left()) if they lie in one slice, with
  // that slice; nullptr otherwise. Does not move.
  const char* Contiguous(uint64_t n, const grpc::Slice** slice) {
    if (p_ == stop_) Next();
    if (n > static_cast<uint64_t>(stop_ - p_)) return nullptr;
    *slice = &(*slices_)[current_];
    return reinterpret_cast<const char*>(p_);
  }

  // Narrows the end to `n` bytes from here (n <= left()); returns the old
  // end for Widen.
  uint64_t Narrow(uint64_t n) {
    uint64_t old = end_;
    end_ = pos_ + n;
    return old;
  }
  void Widen(uint64_t old_end) { end_ = old_end; }

 private:
  // Enters the next non-empty slice; only called with bytes left.
  void Next() {
    while (next_ < slices_->size()) {
      const grpc::Slice& s = (*slices_)[next_++];
      if (s.size() == 0) continue;
      current_ = next_ - 1;
      p_ = s.begin();
      stop_ = s.end();
      return;
    }
  }

  const std::vector<grpc::Slice>* slices_ = nullptr;
  size_t next_ = 0;     // The slice to enter next.
  size_t current_ = 0;  // The slice p_ points into.
  const uint8_t* p_ = nullptr;
  const uint8_t* stop_ = nullptr;
  uint64_t pos_ = 0;
  uint64_t end_ = 0;
};

// Where a value sits ("args[1].shape[0]"), built only for an error: a
// chain of nodes on the parser's stack.
struct Path {
  const Path* parent = nullptr;
  absl::string_view text;  // A root ("args"), a key or a field name.
  int64_t index = -1;      // "[index]" if >= 0 (after text, for a root).

  std::string Render() const {
    std::string out = parent != nullptr ? parent->Render() : "";
    if (parent != nullptr && !text.empty()) absl::StrAppend(&out, ".");
    absl::StrAppend(&out, text);
    if (index >= 0) absl::StrAppend(&out, "[", index, "]");
    return out;
  }
  Path Item(int64_t i) const { return Path{this, "", i}; }
  // ".key" or ".field".
  Path Key(absl::string_view key) const { return Path{this, key, -1}; }
  Path Field(absl::string_view name) const { return Path{this, name, -1}; }
};

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

// A tensor as its fields arrive (fields may come in any order, and a
// repeated tensor field merges into it, as protobuf does).
struct PendingTensor {
  int32_t dtype = 0;
  Shape shape;
  bool has_data = false;
  Cursor data;
  uint64_t nbytes = 0;
};

// A Value message as its fields arrive: the oneof member set last wins.
struct PendingValue {
  int field = 0;  // The Value field set last (0: none, null).
  Value value;    // Scalars, strings, bytes, lists, maps.
  PendingTensor tensor;
  proto::RRefHandle rref;
};

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

int WireTypeOf(int value_field) {
  switch (value_field) {
    case kBool:
    case kInt:
      return kVarint;
    case kDouble:
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
  ValueParser(Cursor* in, const Limits& limits, RRefCodec* codec,
              TensorLanding* landing = nullptr, bool landed = false)
      : in_(in),
        limits_(limits),
        codec_(codec),
        landing_(landing),
        landed_(landed) {}

  // Reads a Value message of `len` bytes at the cursor into `out`.
  absl::Status Message(uint64_t len, int depth, const Path& path,
                       PendingValue* out);
  // The value `pending` describes.
  absl::StatusOr<Value> Finish(PendingValue* pending, const Path& path);

  // A length-delimited field's length, checked against what is left.
  absl::Status Length(const Path& path, uint64_t* len);
  absl::Status SkipField(int wire_type, const Path& path);
  // A string or bytes field of `len` bytes, within --max_string_mb.
  absl::Status ReadString(uint64_t len, const Path& path, std::string* out);

 private:
  absl::Status Body(int depth, const Path& path, PendingValue* out);
  absl::Status Field(int field, int depth, const Path& path, PendingValue* out);
  // The entries (field 1) of the list or map of `len` bytes at the
  // cursor; RESOURCE_EXHAUSTED if more than the values left in the budget.
  absl::Status CountEntries(uint64_t len, const Path& path, int64_t* count);
  absl::Status List(uint64_t len, int depth, const Path& path,
                    Value::List* out);
  absl::Status Map(uint64_t len, int depth, const Path& path, Value::Map* out);
  absl::Status MapEntry(int depth, const Path& path, Value::Map* out);
  absl::Status TensorFields(uint64_t len, const Path& path, PendingTensor* out);
  absl::Status ShapeDim(uint64_t dim, const Path& path, Shape* shape);
  absl::StatusOr<Tensor> FinishTensor(PendingTensor* t, const Path& path);
  absl::Status CheckDims(const Shape& shape, const Path& path) const;
  absl::StatusOr<Tensor> TensorBytes(DType dtype, Shape shape,
                                     PendingTensor* t);
  absl::Status TakeItem(const Path& path);

  Cursor* const in_;
  const Limits& limits_;
  RRefCodec* const codec_;
  // Where the first tensor met goes, if its size fits; null after it.
  TensorLanding* landing_;
  // The landing already holds the first tensor's bytes (it is one of the
  // slices read): that tensor must be exactly there.
  const bool landed_;
  int64_t items_ = 0;
};

absl::Status ValueParser::Length(const Path& path, uint64_t* len) {
  if (!in_->Varint(len)) return Malformed(path, "truncated length");
  if (*len > in_->left()) return Malformed(path, "length past the end");
  return absl::OkStatus();
}

absl::Status ValueParser::SkipField(int wire_type, const Path& path) {
  uint64_t n = 0;
  switch (wire_type) {
    case kVarint:
      if (!in_->Varint(&n)) return Malformed(path, "truncated varint");
      return absl::OkStatus();
    case kFixed64:
      n = 8;
      break;
    case kFixed32:
      n = 4;
      break;
    case kLength:
      FERRY_RETURN_IF_ERROR(Length(path, &n));
      break;
    default:
      return Malformed(path, absl::StrCat("wire type ", wire_type));
  }
  if (!in_->Skip(n)) return Malformed(path, "truncated field");
  return absl::OkStatus();
}

absl::Status ValueParser::ReadString(uint64_t len, const Path& path,
                                     std::string* out) {
  if (len > static_cast<uint64_t>(limits_.max_string_bytes)) {
    return OverLimit(
        absl::StrCat(path.Render(), ": a string of ", HumanBytes(len)),
        HumanBytes(limits_.max_string_bytes), "max_string_mb",
        limits_.max_string_bytes / Limits::kMiB);
  }
  out->resize(len);
  in_->Copy(len, out->data());
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

absl::Status ValueParser::Message(uint64_t len, int depth, const Path& path,
                                  PendingValue* out) {
  FERRY_RETURN_IF_ERROR(TakeItem(path));
  uint64_t outer = in_->Narrow(len);
  absl::Status s = Body(depth, path, out);
  in_->Widen(outer);
  return s;
}

absl::Status ValueParser::Body(int depth, const Path& path, PendingValue* out) {
  while (!in_->done()) {
    uint64_t key;
    if (!in_->Varint(&key)) return Malformed(path, "truncated key");
    const uint64_t field = key >> 3;
    const int wire_type = static_cast<int>(key & 7);
    if (field == 0) return Malformed(path, "field number 0");
    if (field > kRRef || WireTypeOf(static_cast<int>(field)) != wire_type) {
      FERRY_RETURN_IF_ERROR(SkipField(wire_type, path));  // Unknown.
      continue;
    }
    if (out->field != static_cast<int>(field)) {
      *out = PendingValue();  // Another oneof member: the old one goes.
      out->field = static_cast<int>(field);
    }
    FERRY_RETURN_IF_ERROR(Field(static_cast<int>(field), depth, path, out));
  }
  return absl::OkStatus();
}

absl::Status ValueParser::Field(int field, int depth, const Path& path,
                                PendingValue* out) {
  uint64_t v = 0;
  if (field == kBool || field == kInt) {
    if (!in_->Varint(&v)) return Malformed(path, "truncated varint");
    out->value =
        field == kBool ? Value(v != 0) : Value(static_cast<int64_t>(v));
    return absl::OkStatus();
  }
  if (field == kDouble) {
    if (!in_->Fixed(8, &v)) return Malformed(path, "truncated double");
    double d;
    std::memcpy(&d, &v, sizeof(d));
    out->value = Value(d);
    return absl::OkStatus();
  }
  uint64_t len;
  FERRY_RETURN_IF_ERROR(Length(path, &len));
  switch (field) {
    case kString:
    case kBytes: {
      std::string text;
      FERRY_RETURN_IF_ERROR(ReadString(len, path, &text));
      if (field == kBytes) {
        out->value = Value(Bytes{std::move(text)});
        return absl::OkStatus();
      }
      FERRY_RETURN_IF_ERROR(CheckString(text, path));
      out->value = Value(std::move(text));
      return absl::OkStatus();
    }
    case kTensor:
      return TensorFields(len, path, &out->tensor);
    case kList:
    case kMap:
      if (depth >= kMaxValueDepth) return ValueDepthError(path.Render());
      if (field == kList) {
        if (!out->value.is_list()) out->value = Value(Value::List());
        return List(len, depth, path, &out->value.as_list());
      }
      if (!out->value.is_map()) out->value = Value(Value::Map());
      return Map(len, depth, path, &out->value.as_map());
    default: {  // kRRef
      std::string bytes;
      FERRY_RETURN_IF_ERROR(ReadString(len, path, &bytes));
      if (!out->rref.MergeFromString(bytes)) {
        return Malformed(path, "rref handle");
      }
      return absl::OkStatus();
    }
  }
}

absl::Status ValueParser::CountEntries(uint64_t len, const Path& path,
                                       int64_t* count) {
  // A copy of the cursor walks the entries (skipping their bodies), so a
  // list or map of more values than the budget allows fails before any is
  // built, and a list is allocated once.
  Cursor scan = *in_;
  ValueParser counter(&scan, limits_, nullptr);
  scan.Narrow(len);
  *count = 0;
  const int64_t budget = limits_.max_items - items_;
  // Stops one past the budget: the walk costs at most what building would.
  while (!scan.done() && *count <= budget) {
    uint64_t key;
    if (!scan.Varint(&key)) return Malformed(path, "truncated key");
    if (key == ((1 << 3) | kLength)) ++*count;
    FERRY_RETURN_IF_ERROR(counter.SkipField(static_cast<int>(key & 7), path));
  }
  if (*count > budget) {
    return OverLimit(absl::StrCat(path.Render(), ": more than ",
                                  limits_.max_items, " values in one message"),
                     absl::StrCat(limits_.max_items, " values"), "max_items",
                     limits_.max_items);
  }
  return absl::OkStatus();
}

absl::Status ValueParser::List(uint64_t len, int depth, const Path& path,
                               Value::List* out) {
  int64_t count = 0;
  FERRY_RETURN_IF_ERROR(CountEntries(len, path, &count));
  out->reserve(out->size() + static_cast<size_t>(count));
  uint64_t outer = in_->Narrow(len);
  absl::Status s;
  while (s.ok() && !in_->done()) {
    uint64_t key, item_len;
    if (!in_->Varint(&key)) {
      s = Malformed(path, "truncated key");
    } else if (key != ((1 << 3) | kLength)) {
      s = SkipField(static_cast<int>(key & 7), path);
    } else if (s = Length(path, &item_len); s.ok()) {
      const Path item = path.Item(static_cast<int64_t>(out->size()));
      PendingValue pending;
      s = Message(item_len, depth + 1, item, &pending);
      if (s.ok()) {
        absl::StatusOr<Value> v = Finish(&pending, item);
        if (v.ok()) {
          out->push_back(*std::move(v));
        } else {
          s = v.status();
        }
      }
    }
  }
  in_->Widen(outer);
  return s;
}

absl::Status ValueParser::Map(uint64_t len, int depth, const Path& path,
                              Value::Map* out) {
  int64_t count = 0;
  FERRY_RETURN_IF_ERROR(CountEntries(len, path, &count));
  uint64_t outer = in_->Narrow(len);
  absl::Status s;
  while (s.ok() && !in_->done()) {
    uint64_t key, entry_len;
    if (!in_->Varint(&key)) {
      s = Malformed(path, "truncated key");
    } else if (key != ((1 << 3) | kLength)) {
      s = SkipField(static_cast<int>(key & 7), path);
    } else if (s = Length(path, &entry_len); s.ok()) {
      uint64_t entry_end = in_->Narrow(entry_len);
      s = MapEntry(depth, path, out);
      in_->Widen(entry_end);
    }
  }
  in_->Widen(outer);
  return s;
}

// One map entry: key = 1 (string), value = 2 (Value); a later duplicate
// key replaces an earlier one, as protobuf's maps do.
absl::Status ValueParser::MapEntry(int depth, const Path& path,
                                   Value::Map* out) {
  std::string key;
  PendingValue value;
  bool has_value = false;
  while (!in_->done()) {
    uint64_t tag, len;
    if (!in_->Varint(&tag)) return Malformed(path, "truncated key");
    if (tag != ((1 << 3) | kLength) && tag != ((2 << 3) | kLength)) {
      FERRY_RETURN_IF_ERROR(SkipField(static_cast<int>(tag & 7), path));
      continue;
    }
    FERRY_RETURN_IF_ERROR(Length(path, &len));
    if ((tag >> 3) == 1) {
      FERRY_RETURN_IF_ERROR(ReadString(len, path, &key));
      FERRY_RETURN_IF_ERROR(CheckString(key, path));
    } else {
      FERRY_RETURN_IF_ERROR(Message(len, depth + 1, path.Key(key), &value));
      has_value = true;
    }
  }
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

// Tensor fields: dtype = 1, shape = 2 (packed or not), data = 3. The data
// is only located here; its bytes are taken once the shape is checked.
absl::Status ValueParser::TensorFields(uint64_t len, const Path& path,
                                       PendingTensor* out) {
  uint64_t outer = in_->Narrow(len);
  absl::Status s;
  while (s.ok() && !in_->done()) {
    uint64_t key, v, n;
    if (!in_->Varint(&key)) {
      s = Malformed(path, "truncated key");
    } else if (key == ((1 << 3) | kVarint)) {
      if (!in_->Varint(&v)) s = Malformed(path, "truncated dtype");
      out->dtype = static_cast<int32_t>(v);
    } else if (key == ((2 << 3) | kVarint)) {
      s = in_->Varint(&v) ? ShapeDim(v, path, &out->shape)
                          : Malformed(path, "truncated shape");
    } else if (key == ((2 << 3) | kLength)) {
      if (s = Length(path, &n); !s.ok()) break;
      uint64_t packed_end = in_->Narrow(n);
      while (s.ok() && !in_->done()) {
        s = in_->Varint(&v) ? ShapeDim(v, path, &out->shape)
                            : Malformed(path, "truncated shape");
      }
      in_->Widen(packed_end);
    } else if (key == ((3 << 3) | kLength)) {
      if (s = Length(path, &n); !s.ok()) break;
      out->has_data = true;
      out->data = *in_;
      out->nbytes = n;
      in_->Skip(n);
    } else {
      s = SkipField(static_cast<int>(key & 7), path);
    }
  }
  in_->Widen(outer);
  return s;
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
  const uint64_t got = t->has_data ? t->nbytes : 0;
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
  const uint64_t n = t->nbytes;
  if (landing_ != nullptr && landed_) {
    TensorLanding* at = std::exchange(landing_, nullptr);
    const grpc::Slice* slice = nullptr;
    if (n != at->nbytes || n == 0 || t->data.Contiguous(n, &slice) != at->data)
      return absl::InvalidArgumentError(
          "malformed message (the first tensor is not where its prefix put "
          "it)");
    return Tensor::FromShared(dtype, std::move(shape), at->owner, at->data, n);
  }
  if (landing_ != nullptr) {
    TensorLanding* at = std::exchange(landing_, nullptr);
    if (n == at->nbytes && n > 0) {
      t->data.Copy(n, at->data);
      return Tensor::FromShared(dtype, std::move(shape), at->owner, at->data,
                                n);
    }
  }
  if (n == 0) {
    return Tensor::FromShared(dtype, std::move(shape), EmptyBytes(),
                              EmptyBytes().get(), 0);
  }
  const size_t align = std::min<size_t>(ItemSize(dtype), 8);
  const grpc::Slice* slice = nullptr;
  const char* bytes = n >= kAliasMin ? t->data.Contiguous(n, &slice) : nullptr;
  if (bytes != nullptr && reinterpret_cast<uintptr_t>(bytes) % align == 0) {
    auto owner = std::make_shared<grpc::Slice>(*slice);  // A reference.
    return Tensor::FromShared(dtype, std::move(shape), std::move(owner), bytes,
                              n);
  }
  std::shared_ptr<char> copy(new char[n], std::default_delete<char[]>());
  t->data.Copy(n, copy.get());
  const char* data = copy.get();
  return Tensor::FromShared(dtype, std::move(shape), std::move(copy), data, n);
}

absl::StatusOr<Value> ValueParser::Finish(PendingValue* pending,
                                          const Path& path) {
  switch (pending->field) {
    case kTensor: {
      FERRY_ASSIGN_OR_RETURN(Tensor t, FinishTensor(&pending->tensor, path));
      return Value(std::move(t));
    }
    case kRRef: {
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

// The fields of the message ending at `end`: visit(field, len) for each
// length-delimited one, with the cursor at its bytes (visit moves past
// them); others are skipped. False once the bytes end, on a malformed
// field, or when visit returns false.
template <typename Visit>
bool EachLengthField(Cursor* in, uint64_t end, Visit visit) {
  while (in->pos() < end) {
    uint64_t key, n;
    if (!in->Varint(&key)) return false;
    const int type = static_cast<int>(key & 7);
    const bool read =
        type == kVarint    ? in->Varint(&n)
        : type == kFixed64 ? in->Skip(8)
        : type == kFixed32 ? in->Skip(4)
        : type == kLength
            ? in->Varint(&n) && n <= end - in->pos() && visit(key >> 3, n)
            : false;
    if (!read) return false;
  }
  return true;
}

// Depth first through the Value message of `len` bytes at `in`: the
// tensors' data fields, appended to `out` in order. False once the bytes
// end (or are malformed): nothing after that is placed. `len` may run past
// the bytes there are: reading stops where they end.
bool FindTensorData(Cursor* in, uint64_t len, int depth,
                    std::vector<TensorPlace>* out) {
  if (depth > kMaxValueDepth) return false;
  // A Value in a list entry (field 1) or a map entry's value (field 2).
  auto value_in = [&](int wanted) {
    return [in, depth, out, wanted](uint64_t field, uint64_t n) {
      return field == static_cast<uint64_t>(wanted)
                 ? FindTensorData(in, n, depth + 1, out)
                 : in->Skip(n);
    };
  };
  return EachLengthField(in, in->pos() + len, [&](uint64_t field, uint64_t n) {
    const uint64_t end = in->pos() + n;
    switch (field) {
      case kTensor:
        return EachLengthField(in, end, [&](uint64_t f, uint64_t data) {
          if (f == 3) out->push_back(TensorPlace{in->pos(), data});
          return in->Skip(data);
        });
      case kList:
        return EachLengthField(in, end, value_in(1));
      case kMap:
        return EachLengthField(in, end, [&](uint64_t f, uint64_t entry) {
          return f == 1 ? EachLengthField(in, in->pos() + entry, value_in(2))
                        : in->Skip(entry);
        });
      default:
        return in->Skip(n);
    }
  });
}

// CallRequest fields (proto/worker.proto).
enum CallField { kFunction = 1, kArgs, kCallerNode, kCallerName, kCreateRRef };

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  // Dump only fails on a buffer without bytes (an empty message).
  (void)bytes.Dump(&slices);
  return slices;
}

// The header of a CallRequest, and where each argument lies.
struct CallRequestScan {
  CallHeader header;
  std::vector<std::pair<Cursor, uint64_t>> args;  // (start, length)
  absl::Status args_error;
};

absl::Status ScanCallField(uint64_t key, ValueParser* parser, Cursor* in,
                           const Limits& limits, CallRequestScan* scan) {
  static const Path kRoot{nullptr, "request", -1};
  const uint64_t field = key >> 3;
  const int wire_type = static_cast<int>(key & 7);
  CallHeader& h = scan->header;
  uint64_t len = 0;
  if (field == kCallerNode && wire_type == kVarint) {
    if (!in->Varint(&h.caller_node)) return Malformed(kRoot, "caller_node");
    return absl::OkStatus();
  }
  if (field < kFunction || field > kCreateRRef || field == kCallerNode ||
      wire_type != kLength) {
    return parser->SkipField(wire_type, kRoot);
  }
  const Path at = kRoot.Field(field == kFunction     ? "function"
                              : field == kCallerName ? "caller_name"
                              : field == kArgs       ? "args"
                                                     : "create_rref");
  FERRY_RETURN_IF_ERROR(parser->Length(at, &len));
  if (field == kArgs) {
    if (static_cast<int64_t>(scan->args.size()) >= limits.max_args) {
      scan->args_error = OverLimit(
          absl::StrCat("args: more than ", limits.max_args, " arguments"),
          absl::StrCat(limits.max_args, " arguments"), "max_args",
          limits.max_args);
      return absl::OkStatus();
    }
    scan->args.emplace_back(*in, len);
    in->Skip(len);
    return absl::OkStatus();
  }
  std::string text;
  FERRY_RETURN_IF_ERROR(parser->ReadString(len, at, &text));
  if (field == kCreateRRef) {
    if (!h.create_rref) h.create_rref.emplace();
    if (!h.create_rref->MergeFromString(text)) {
      return Malformed(at, "rref handle");
    }
    return absl::OkStatus();
  }
  FERRY_RETURN_IF_ERROR(CheckString(text, at));
  (field == kFunction ? h.function : h.caller_name) = std::move(text);
  return absl::OkStatus();
}

absl::Status ScanCallRequest(Cursor in, const Limits& limits,
                             CallRequestScan* scan) {
  ValueParser parser(&in, limits, nullptr);
  // Stops at the first argument past --max_args: nothing after it is
  // needed to refuse the call.
  while (!in.done() && scan->args_error.ok()) {
    uint64_t key;
    if (!in.Varint(&key)) {
      return Malformed(Path{nullptr, "request", -1}, "truncated key");
    }
    FERRY_RETURN_IF_ERROR(ScanCallField(key, &parser, &in, limits, scan));
  }
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
      ScanCallRequest(Cursor(&reader.slices_), limits, &scan));
  reader.header_ = std::move(scan.header);
  reader.args_error_ = scan.args_error;
  return reader;
}

absl::StatusOr<std::vector<Value>> CallRequestReader::Args(RRefCodec* codec) {
  FERRY_RETURN_IF_ERROR(args_error_);
  CallRequestScan scan;
  FERRY_RETURN_IF_ERROR(ScanCallRequest(Cursor(&slices_), limits_, &scan));
  std::vector<Value> args;
  args.reserve(scan.args.size());
  // One parser for every argument: --max_items counts the whole message.
  Cursor in;
  ValueParser parser(&in, limits_, codec);
  for (size_t i = 0; i < scan.args.size(); ++i) {
    in = scan.args[i].first;
    const Path path{nullptr, "args", static_cast<int64_t>(i)};
    PendingValue pending;
    FERRY_RETURN_IF_ERROR(
        parser.Message(scan.args[i].second, 0, path, &pending));
    FERRY_ASSIGN_OR_RETURN(Value v, parser.Finish(&pending, path));
    args.push_back(std::move(v));
  }
  return args;
}

absl::StatusOr<Value> ReadValue(const std::vector<grpc::Slice>& slices,
                                const Limits& limits, absl::string_view path,
                                TensorLanding* landing, bool landed) {
  Cursor in(&slices);
  ValueParser parser(&in, limits, nullptr, landing, landed);
  const Path root{nullptr, path, -1};
  PendingValue pending;
  FERRY_RETURN_IF_ERROR(parser.Message(in.left(), 0, root, &pending));
  return parser.Finish(&pending, root);
}

std::vector<TensorPlace> FindTensorData(const std::vector<grpc::Slice>& slices,
                                        uint64_t total) {
  Cursor in(&slices);
  std::vector<TensorPlace> places;
  FindTensorData(&in, total, 0, &places);
  return places;
}

absl::StatusOr<Value> ReadCallResponse(const grpc::ByteBuffer& bytes,
                                       const Limits& limits, RRefCodec* codec) {
  std::vector<grpc::Slice> slices = SlicesOf(bytes);
  Cursor in(&slices);
  ValueParser parser(&in, limits, codec);
  const Path path{nullptr, "result", -1};
  PendingValue pending;
  while (!in.done()) {
    uint64_t key, len;
    if (!in.Varint(&key)) return Malformed(path, "truncated key");
    if (key != ((1 << 3) | kLength)) {
      FERRY_RETURN_IF_ERROR(parser.SkipField(static_cast<int>(key & 7), path));
      continue;
    }
    FERRY_RETURN_IF_ERROR(parser.Length(path, &len));
    // A repeated result field merges into one value, as protobuf does.
    FERRY_RETURN_IF_ERROR(parser.Message(len, 0, path, &pending));
  }
  return parser.Finish(&pending, path);
}

}  // namespace ferry
