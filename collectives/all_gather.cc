// all_gather: every rank ends with every rank's value.
//
// Step 0 sends each rank's metadata to everyone, with the value itself when
// it is small; large values then go around the ring (steps 1..), skipping
// those already delivered. Every rank learns every value's metadata before
// any large transfer, so a mismatch fails the op early and identically on
// every rank.
//
// Two forms: without "axis", the list of every rank's tensor (torch; shapes
// may differ, dtypes may not). With "axis", tf's form: a nested structure of
// tensors, the same on every rank except along the axis, concatenated leaf
// by leaf in rank order.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "collectives/ring.h"
#include "rpc/base/status_util.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor_math.h"

namespace ferry {
namespace algorithms {

namespace {

using CheckMetas =
    absl::FunctionRef<absl::Status(const std::vector<Value>& metas)>;

// Every rank's `mine`, by group rank; `check` sees every rank's `meta`
// before large values travel.
absl::StatusOr<std::vector<Value>> GatherValues(Op& op, Value mine, Value meta,
                                                CheckMetas check) {
  const bool direct = PayloadBytes(mine) <= op.config().direct_bytes;
  Value::Map first = {{"meta", std::move(meta)},
                      {"inline", direct},
                      {"value", direct ? mine : Value()}};
  FERRY_ASSIGN_OR_RETURN(std::vector<Value> step0,
                         op.ExchangeAll(0, Value(std::move(first))));
  const int n = op.size();
  std::vector<Value> metas(n), values(n);
  std::vector<bool> skip(n);
  for (int r = 0; r < n; ++r) {
    FERRY_ASSIGN_OR_RETURN(const Value* m, Part(op, step0[r], "meta", r));
    FERRY_ASSIGN_OR_RETURN(const Value* in, Part(op, step0[r], "inline", r));
    FERRY_ASSIGN_OR_RETURN(const Value* v, Part(op, step0[r], "value", r));
    metas[r] = *m;
    skip[r] = in->is_bool() && in->as_bool();
    values[r] = *v;
  }
  FERRY_RETURN_IF_ERROR(check(metas));
  values[op.rank()] = std::move(mine);
  FERRY_RETURN_IF_ERROR(RingAllGather(op, 1, values, skip));
  return values;
}

absl::StatusOr<Value> GatherList(Op& op, const Value& input) {
  FERRY_ASSIGN_OR_RETURN(Tensor t, TensorArg(op, input, "input"));
  auto same_dtype = [&](const std::vector<Value>& dtypes) {
    return CheckSameMeta(op, dtypes, "dtype");
  };
  FERRY_ASSIGN_OR_RETURN(
      std::vector<Value> all,
      GatherValues(op, input, std::string(DTypeName(t.dtype())), same_dtype));
  for (int r = 0; r < op.size(); ++r) {
    if (!all[r].is_tensor() || all[r].as_tensor().dtype() != t.dtype()) {
      return Malformed(op, r, "expected a tensor");
    }
  }
  return Value(Value::List(std::move(all)));
}

// ---- tf form ----

// value["a"][1]
std::string Child(const std::string& path, const Value& key) {
  return absl::StrCat(path, "[", ToJson(key), "]");
}

// The structure of `v` with each tensor replaced by its metadata; this
// rank's INVALID_ARGUMENT for anything but lists, maps and tensors of rank
// ≥ 1 with `axis` in range.
absl::StatusOr<Value> Skeleton(const Op& op, const Value& v, int64_t axis,
                               const std::string& path) {
  if (v.is_tensor()) {
    const Tensor& t = v.as_tensor();
    if (t.rank() == 0) {
      return op.BadInput(
          absl::StrCat(path,
                       " is a 0-d tensor: all_gather along an axis needs "
                       "rank >= 1 (expand it first)"));
    }
    if (axis < -t.rank() || axis >= t.rank()) {
      return op.BadInput(absl::StrCat("axis ", axis, " is out of range for ",
                                      path, " of shape ",
                                      ShapeString(t.shape())));
    }
    return TensorMeta(t);
  }
  if (v.is_list()) {
    Value::List out;
    for (size_t i = 0; i < v.as_list().size(); ++i) {
      FERRY_ASSIGN_OR_RETURN(
          Value s, Skeleton(op, v.as_list()[i], axis,
                            Child(path, Value(static_cast<int64_t>(i)))));
      out.push_back(std::move(s));
    }
    return Value(std::move(out));
  }
  if (v.is_map()) {
    Value::Map out;
    for (const auto& [k, x] : v.as_map()) {
      FERRY_ASSIGN_OR_RETURN(out[k],
                             Skeleton(op, x, axis, Child(path, Value(k))));
    }
    return Value(std::move(out));
  }
  return op.BadInput(absl::StrCat(
      path, " is a ", v.kind_name(),
      ": all_gather along an axis takes tensors, in lists and maps"));
}

std::string Describe(const Value& s) {
  if (IsTensorMeta(s)) return MetaString(s);
  if (s.is_list()) return absl::StrCat("a list of ", s.as_list().size());
  if (s.is_map())
    return absl::StrCat("a map with keys ", ToJson(Value(Value::List([&] {
                          Value::List keys;
                          for (const auto& [k, x] : s.as_map())
                            keys.push_back(k);
                          return keys;
                        }()))));
  return std::string(s.kind_name());
}

// Rank r's skeleton `s` against rank 0's `s0`.
absl::Status SameStructure(const Op& op, int r, const Value& s, const Value& s0,
                           int64_t axis, const std::string& path) {
  auto differ = [&](absl::string_view why) {
    return Mismatch(op, r, path, Describe(s), absl::StrCat(Describe(s0), why));
  };
  if (IsTensorMeta(s0) || IsTensorMeta(s)) {
    if (!IsTensorMeta(s0) || !IsTensorMeta(s)) return differ("");
    const Value::List& dims = s.Find("shape")->as_list();
    const Value::List& dims0 = s0.Find("shape")->as_list();
    if (*s.Find("dtype") != *s0.Find("dtype") || dims.size() != dims0.size())
      return differ("");
    const int64_t a =
        axis < 0 ? axis + static_cast<int64_t>(dims0.size()) : axis;
    for (size_t d = 0; d < dims0.size(); ++d) {
      if (static_cast<int64_t>(d) != a && dims[d] != dims0[d]) {
        return differ(
            absl::StrCat(" (shapes may differ only along axis ", axis, ")"));
      }
    }
    return absl::OkStatus();
  }
  // A skeleton is tensor metadata, a list or a map, unless a peer forged
  // it: anything else would be read below as a map.
  if (!s0.is_list() && !s0.is_map())
    return Malformed(op, 0, absl::StrCat(path, " is no structure"));
  if (!s.is_list() && !s.is_map())
    return Malformed(op, r, absl::StrCat(path, " is no structure"));
  if (s.kind() != s0.kind()) return differ("");
  if (s0.is_list()) {
    if (s.as_list().size() != s0.as_list().size()) return differ("");
    for (size_t i = 0; i < s0.as_list().size(); ++i) {
      FERRY_RETURN_IF_ERROR(
          SameStructure(op, r, s.as_list()[i], s0.as_list()[i], axis,
                        Child(path, Value(static_cast<int64_t>(i)))));
    }
    return absl::OkStatus();
  }
  auto it = s.as_map().begin();
  if (s.as_map().size() != s0.as_map().size()) return differ("");
  for (const auto& [k, x0] : s0.as_map()) {
    if (it->first != k) return differ("");
    FERRY_RETURN_IF_ERROR(
        SameStructure(op, r, it->second, x0, axis, Child(path, Value(k))));
    ++it;
  }
  return absl::OkStatus();
}

// The leaves of every rank's value at one place in the structure (checked
// equal), concatenated.
absl::StatusOr<Value> Join(const std::vector<const Value*>& at, int64_t axis) {
  const Value& v0 = *at[0];
  if (v0.is_tensor()) {
    std::vector<Tensor> parts;
    for (const Value* v : at) parts.push_back(v->as_tensor());
    FERRY_ASSIGN_OR_RETURN(Tensor joined, Concat(parts, axis));
    return Value(std::move(joined));
  }
  if (v0.is_list()) {
    Value::List out;
    for (size_t i = 0; i < v0.as_list().size(); ++i) {
      std::vector<const Value*> next;
      for (const Value* v : at) next.push_back(&v->as_list()[i]);
      FERRY_ASSIGN_OR_RETURN(Value joined, Join(next, axis));
      out.push_back(std::move(joined));
    }
    return Value(std::move(out));
  }
  Value::Map out;
  for (const auto& [k, x] : v0.as_map()) {
    std::vector<const Value*> next;
    for (const Value* v : at) next.push_back(v->Find(k));
    FERRY_ASSIGN_OR_RETURN(out[k], Join(next, axis));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> GatherAlongAxis(Op& op, const Value& input,
                                      int64_t axis) {
  FERRY_ASSIGN_OR_RETURN(Value skeleton, Skeleton(op, input, axis, "value"));
  Value meta(Value::Map{{"axis", axis}, {"structure", std::move(skeleton)}});
  auto same = [&](const std::vector<Value>& metas) -> absl::Status {
    std::vector<Value> axes;
    for (int r = 0; r < op.size(); ++r) {
      FERRY_ASSIGN_OR_RETURN(const Value* a, Part(op, metas[r], "axis", r));
      axes.push_back(*a);
    }
    FERRY_RETURN_IF_ERROR(CheckSameMeta(op, axes, "axis"));
    FERRY_ASSIGN_OR_RETURN(const Value* s0, Part(op, metas[0], "structure", 0));
    for (int r = 1; r < op.size(); ++r) {
      FERRY_ASSIGN_OR_RETURN(const Value* s,
                             Part(op, metas[r], "structure", r));
      FERRY_RETURN_IF_ERROR(SameStructure(op, r, *s, *s0, axis, "value"));
    }
    return absl::OkStatus();
  };
  FERRY_ASSIGN_OR_RETURN(std::vector<Value> all,
                         GatherValues(op, input, std::move(meta), same));
  // Join relies on the structures: check them as received too (a sender's
  // value always matches the metadata it sent, unless it is malformed).
  std::vector<Value> skeletons(op.size());
  for (int r = 0; r < op.size(); ++r) {
    absl::StatusOr<Value> s = Skeleton(op, all[r], axis, "value");
    if (!s.ok()) {  // Not this rank's input: the sender's message is bad.
      return r == op.rank() ? s.status()
                            : Malformed(op, r, "a value unlike its metadata");
    }
    skeletons[r] = *std::move(s);
  }
  for (int r = 1; r < op.size(); ++r) {
    FERRY_RETURN_IF_ERROR(
        SameStructure(op, r, skeletons[r], skeletons[0], axis, "value"));
  }
  std::vector<const Value*> at;
  for (const Value& v : all) at.push_back(&v);
  return Join(at, axis);
}

}  // namespace

absl::StatusOr<Value> AllGather(Op& op, const Value& input,
                                const Value& params) {
  const Value* axis = params.Find("axis");
  if (axis == nullptr || axis->is_null()) return GatherList(op, input);
  FERRY_ASSIGN_OR_RETURN(int64_t a, IntParam(op, params, "axis", std::nullopt));
  return GatherAlongAxis(op, input, a);
}

}  // namespace algorithms
}  // namespace ferry
