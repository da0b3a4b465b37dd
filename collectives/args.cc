#include "collectives/args.h"

#include "absl/strings/str_cat.h"
#include "rpc/json.h"

namespace ferry {

absl::StatusOr<Tensor> TensorArg(const Op& op, const Value& v, absl::string_view what) {
  if (!v.is_tensor()) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat(what, " must be a tensor, got ", v.kind_name()));
  }
  return v.as_tensor();
}

absl::StatusOr<std::vector<Tensor>> TensorListArg(const Op& op, const Value& v, int n,
                                                  absl::string_view what) {
  if (!v.is_list() || static_cast<int>(v.as_list().size()) != n) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat(what, " must be a list of ", n, " tensors (one per rank), got ",
                                 v.is_list() ? absl::StrCat(v.as_list().size(), " items")
                                             : std::string(v.kind_name())));
  }
  std::vector<Tensor> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Tensor> t = TensorArg(op, v.as_list()[i], absl::StrCat(what, "[", i, "]"));
    if (!t.ok()) return t.status();
    if (i > 0 && t->dtype() != out[0].dtype()) {
      return op.Error(absl::StatusCode::kInvalidArgument,
                      absl::StrCat(what, "[", i, "] is ", DTypeName(t->dtype()), " but ", what,
                                   "[0] is ", DTypeName(out[0].dtype())));
    }
    out.push_back(*std::move(t));
  }
  return out;
}

absl::StatusOr<int64_t> IntParam(const Op& op, const Value& params, absl::string_view key,
                                 std::optional<int64_t> fallback) {
  const Value* v = params.Find(key);
  if (v == nullptr || v->is_null()) {
    if (fallback) return *fallback;
    return op.Error(absl::StatusCode::kInvalidArgument, absl::StrCat("missing \"", key, "\""));
  }
  if (!v->is_int()) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("\"", key, "\" must be an integer, got ", v->kind_name()));
  }
  return v->as_int();
}

absl::StatusOr<int> RankParam(const Op& op, const Value& params, absl::string_view key) {
  absl::StatusOr<int64_t> r = IntParam(op, params, key, std::nullopt);
  if (!r.ok()) return r.status();
  if (*r < 0 || *r >= op.size()) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("\"", key, "\" ", *r, " is not a rank of the group (size ",
                                 op.size(), ")"));
  }
  return static_cast<int>(*r);
}

absl::StatusOr<std::optional<std::vector<int64_t>>> SplitsArg(const Op& op, const Value& v,
                                                              absl::string_view what, int n) {
  if (v.is_null() || (v.is_list() && v.as_list().empty())) {
    return std::optional<std::vector<int64_t>>();
  }
  auto bad = [&](std::string why) {
    return op.Error(absl::StatusCode::kInvalidArgument, absl::StrCat(what, ": ", why));
  };
  std::vector<int64_t> splits;
  if (v.is_tensor() && KindOf(v.as_tensor().dtype()) == DTypeKind::kInteger) {
    for (int64_t x : Cast(v.as_tensor(), DType::kInt64).ToVector<int64_t>()) splits.push_back(x);
  } else if (v.is_list()) {
    for (const Value& x : v.as_list()) {
      if (!x.is_int()) return bad(absl::StrCat("entries must be integers, got ", x.kind_name()));
      splits.push_back(x.as_int());
    }
  } else {
    return bad(absl::StrCat("must be a list of integers, got ", v.kind_name()));
  }
  if (static_cast<int>(splits.size()) != n) {
    return bad(absl::StrCat("has ", splits.size(), " entries, the group has ", n, " ranks"));
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0) return bad(absl::StrCat("entry ", i, " is negative (", splits[i], ")"));
  }
  return std::optional<std::vector<int64_t>>(std::move(splits));
}

Value TensorMeta(const Tensor& t) {
  Value::List shape;
  for (int64_t d : t.shape()) shape.push_back(Value(d));
  return Value(Value::Map{{"dtype", std::string(DTypeName(t.dtype()))}, {"shape", shape}});
}

std::string MetaString(const Value& meta) {
  const Value* dtype = meta.Find("dtype");
  const Value* shape = meta.Find("shape");
  if (dtype == nullptr || shape == nullptr) return ToJson(meta);
  std::vector<int64_t> dims;
  for (const Value& d : shape->as_list()) dims.push_back(d.as_int());
  return absl::StrCat(dtype->as_string(), " ", ShapeString(dims));
}

absl::Status CheckSameMeta(const Op& op, const std::vector<Value>& metas,
                           absl::string_view field) {
  for (size_t r = 1; r < metas.size(); ++r) {
    if (metas[r] != metas[0]) {
      return op.Error(absl::StatusCode::kInvalidArgument,
                      absl::StrCat(op.Who(static_cast<int>(r)), " has ", field, " ",
                                   MetaString(metas[r]), " but ", op.Who(0), " has ",
                                   MetaString(metas[0])));
    }
  }
  return absl::OkStatus();
}

int64_t Product(const Shape& shape, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < shape.size(); ++i) p *= shape[i];
  return p;
}

}  // namespace ferry
