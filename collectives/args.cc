#include "collectives/args.h"

#include "absl/strings/str_cat.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor_math.h"

namespace ferry {

absl::StatusOr<Tensor> TensorArg(const Op& op, const Value& v,
                                 absl::string_view what) {
  if (!v.is_tensor()) {
    return op.BadInput(
        absl::StrCat(what, " must be a tensor, got ", v.kind_name()));
  }
  return v.as_tensor();
}

absl::StatusOr<std::vector<Tensor>> TensorListArg(const Op& op, const Value& v,
                                                  int n,
                                                  absl::string_view what) {
  if (!v.is_list() || static_cast<int>(v.as_list().size()) != n) {
    return op.BadInput(absl::StrCat(
        what, " must be a list of ", n, " tensors (one per rank), got ",
        v.is_list() ? absl::StrCat(v.as_list().size(), " items")
                    : std::string(v.kind_name())));
  }
  std::vector<Tensor> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Tensor> t =
        TensorArg(op, v.as_list()[i], absl::StrCat(what, "[", i, "]"));
    if (!t.ok()) return t.status();
    if (i > 0 && t->dtype() != out[0].dtype()) {
      return op.BadInput(absl::StrCat(what, "[", i, "] is ",
                                      DTypeName(t->dtype()), " but ", what,
                                      "[0] is ", DTypeName(out[0].dtype())));
    }
    out.push_back(*std::move(t));
  }
  return out;
}

absl::StatusOr<int64_t> IntParam(const Op& op, const Value& params,
                                 absl::string_view key,
                                 std::optional<int64_t> fallback) {
  const Value* v = params.Find(key);
  if (v == nullptr || v->is_null()) {
    if (fallback) return *fallback;
    return op.BadInput(absl::StrCat("missing \"", key, "\""));
  }
  if (!v->is_int()) {
    return op.BadInput(
        absl::StrCat("\"", key, "\" must be an integer, got ", v->kind_name()));
  }
  return v->as_int();
}

absl::StatusOr<int> RankParam(const Op& op, const Value& params,
                              absl::string_view key) {
  absl::StatusOr<int64_t> r = IntParam(op, params, key, std::nullopt);
  if (!r.ok()) return r.status();
  if (*r < 0 || *r >= op.size()) {
    return op.BadInput(absl::StrCat("\"", key, "\" ", *r,
                                    " is not a rank of the group (size ",
                                    op.size(), ")"));
  }
  return static_cast<int>(*r);
}

absl::StatusOr<ReduceOp> ReduceParam(const Op& op, const Value& params,
                                     DType dtype) {
  const Value* name = params.Find("op");
  std::string n = "sum";
  if (name != nullptr && !name->is_null()) {
    if (!name->is_string())
      return op.BadInput("\"op\" must be a string such as \"sum\"");
    n = name->as_string();
  }
  absl::StatusOr<ReduceOp> reduce = ParseReduceOp(n);
  if (!reduce.ok()) return op.BadInput(reduce.status().message());
  absl::Status applies = CheckReduceOp(*reduce, dtype);
  if (!applies.ok()) return op.BadInput(applies.message());
  return *reduce;
}

absl::StatusOr<std::optional<std::vector<int64_t>>> SplitsArg(
    const Op& op, const Value& v, absl::string_view what, int n) {
  if (v.is_null() || (v.is_list() && v.as_list().empty())) {
    return std::optional<std::vector<int64_t>>();
  }
  auto bad = [&](std::string why) {
    return op.BadInput(absl::StrCat(what, " ", why));
  };
  // The count first: converting a huge list or tensor would cost what the
  // sender chose.
  const int64_t count = v.is_tensor() ? v.as_tensor().numel()
                        : v.is_list() ? static_cast<int64_t>(v.as_list().size())
                                      : -1;
  if (count >= 0 && count != n) {
    return bad(
        absl::StrCat("has ", count, " entries, the group has ", n, " ranks"));
  }
  std::vector<int64_t> splits;
  if (v.is_tensor() && KindOf(v.as_tensor().dtype()) == DTypeKind::kInteger) {
    for (int64_t x : Cast(v.as_tensor(), DType::kInt64).ToVector<int64_t>())
      splits.push_back(x);
  } else if (v.is_list()) {
    for (const Value& x : v.as_list()) {
      if (!x.is_int())
        return bad(
            absl::StrCat("entries must be integers, got ", x.kind_name()));
      splits.push_back(x.as_int());
    }
  } else {
    return bad(absl::StrCat("must be a list of integers, got ", v.kind_name()));
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0) {
      return op.BadInput(
          absl::StrCat(what, "[", i, "] is negative (", splits[i], ")"));
    }
  }
  return std::optional<std::vector<int64_t>>(std::move(splits));
}

absl::Status Malformed(const Op& op, int from, absl::string_view what) {
  return op.Error(
      absl::StatusCode::kInternal,
      absl::StrCat("malformed message from ", op.Who(from), ": ", what));
}

absl::StatusOr<const Value*> Part(const Op& op, const Value& message,
                                  absl::string_view key, int from) {
  const Value* v = message.Find(key);
  if (v == nullptr)
    return Malformed(op, from, absl::StrCat("no \"", key, "\""));
  return v;
}

absl::StatusOr<Tensor> TensorLike(const Op& op, const Value& message, int from,
                                  const Tensor& like) {
  if (!message.is_tensor() || message.as_tensor().dtype() != like.dtype() ||
      message.as_tensor().numel() != like.numel()) {
    return Malformed(op, from, absl::StrCat("expected ", like.DebugString()));
  }
  return message.as_tensor();
}

absl::StatusOr<Tensor> TensorPart(const Op& op, const Value& message,
                                  absl::string_view key, int from,
                                  const Tensor& like) {
  absl::StatusOr<const Value*> v = Part(op, message, key, from);
  if (!v.ok()) return v.status();
  return TensorLike(op, **v, from, like);
}

Value TensorMeta(const Tensor& t) {
  Value::List shape;
  for (int64_t d : t.shape()) shape.push_back(Value(d));
  return Value(Value::Map{{"dtype", std::string(DTypeName(t.dtype()))},
                          {"shape", shape}});
}

bool IsTensorMeta(const Value& meta) {
  const Value* dtype = meta.Find("dtype");
  const Value* shape = meta.Find("shape");
  if (dtype == nullptr || !dtype->is_string() || shape == nullptr ||
      !shape->is_list()) {
    return false;
  }
  for (const Value& d : shape->as_list()) {
    if (!d.is_int()) return false;
  }
  return true;
}

std::string MetaString(const Value& meta) {
  if (meta.is_string()) return meta.as_string();
  if (!IsTensorMeta(meta)) return ToJson(meta);
  std::vector<int64_t> dims;
  for (const Value& d : meta.Find("shape")->as_list())
    dims.push_back(d.as_int());
  return absl::StrCat(meta.Find("dtype")->as_string(), " ", ShapeString(dims));
}

absl::Status Mismatch(const Op& op, int r, absl::string_view field,
                      absl::string_view theirs, absl::string_view rank0s) {
  return op.Error(absl::StatusCode::kInvalidArgument,
                  absl::StrCat(op.Who(r), " has ", field, " ", theirs, " but ",
                               op.Who(0), " has ", rank0s));
}

absl::Status CheckSameMeta(const Op& op, const std::vector<Value>& metas,
                           absl::string_view field) {
  for (size_t r = 1; r < metas.size(); ++r) {
    if (metas[r] != metas[0]) {
      return Mismatch(op, static_cast<int>(r), field, MetaString(metas[r]),
                      MetaString(metas[0]));
    }
  }
  return absl::OkStatus();
}

Value IntList(const std::vector<int64_t>& xs) {
  return Value(Value::List(xs.begin(), xs.end()));
}

int64_t PayloadBytes(const Value& v) {
  constexpr int64_t kNode = 16;  // Roughly, a value's framing on the wire.
  switch (v.kind()) {
    case Value::Kind::kTensor:
      return kNode + static_cast<int64_t>(v.as_tensor().nbytes());
    case Value::Kind::kString:
      return kNode + static_cast<int64_t>(v.as_string().size());
    case Value::Kind::kBytes:
      return kNode + static_cast<int64_t>(v.as_bytes().data.size());
    case Value::Kind::kList: {
      int64_t n = kNode;
      for (const Value& x : v.as_list()) n += PayloadBytes(x);
      return n;
    }
    case Value::Kind::kMap: {
      int64_t n = kNode;
      for (const auto& [k, x] : v.as_map())
        n += kNode + static_cast<int64_t>(k.size()) + PayloadBytes(x);
      return n;
    }
    default:
      return kNode;
  }
}

int64_t Product(const Shape& shape, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < shape.size(); ++i) p *= shape[i];
  return p;
}

}  // namespace ferry
