#include "collectives/algorithms/args.h"

#include "absl/strings/str_cat.h"
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
                                                  absl::string_view what) {
  const int n = op.size();
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

absl::StatusOr<ReduceOp> ReduceParam(const Op& op, const Value& params) {
  const Value* name = params.Find("op");
  std::string n = "sum";
  if (name != nullptr && !name->is_null()) {
    if (!name->is_string())
      return op.BadInput("\"op\" must be a string such as \"sum\"");
    n = name->as_string();
  }
  absl::StatusOr<ReduceOp> reduce = ParseReduceOp(n);
  if (!reduce.ok()) return op.BadInput(reduce.status().message());
  return *reduce;
}

absl::StatusOr<std::vector<int64_t>> SplitsArg(const Op& op, const Value& v,
                                               absl::string_view what) {
  if (v.is_null() || (v.is_list() && v.as_list().empty()))
    return std::vector<int64_t>();
  auto bad = [&](std::string why) {
    return op.BadInput(absl::StrCat(what, " ", why));
  };
  // The count first: converting a huge list or tensor would cost what the
  // sender chose.
  const int64_t count = v.is_tensor() ? v.as_tensor().numel()
                        : v.is_list() ? static_cast<int64_t>(v.as_list().size())
                                      : -1;
  if (count >= 0 && count != op.size()) {
    return bad(absl::StrCat("has ", count, " entries, the group has ",
                            op.size(), " ranks"));
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
  return splits;
}

}  // namespace ferry
