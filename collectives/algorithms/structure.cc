#include "collectives/algorithms/structure.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/op/checks.h"
#include "rpc/value/json.h"

namespace ferry {

namespace {

// What a place in a structure is, in a mismatch's words.
std::string Describe(const proto::Structure& s) {
  if (s.has_tensor()) return MetaString(s.tensor());
  if (s.has_list()) return absl::StrCat("a list of ", s.list().items_size());
  Value::List keys(s.map().keys().begin(), s.map().keys().end());
  return absl::StrCat("a map with keys ", ToJson(Value(std::move(keys))));
}

}  // namespace

std::string Child(const std::string& path, const Value& key) {
  return absl::StrCat(path, "[", ToJson(key), "]");
}

absl::Status Skeleton(const Op& op, const Value& v, int64_t axis,
                      const std::string& path, proto::Structure* out,
                      std::vector<Tensor>* leaves) {
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
    *out->mutable_tensor() = MetaOf(t);
    leaves->push_back(t);
    return absl::OkStatus();
  }
  if (v.is_list()) {
    proto::StructureList* list = out->mutable_list();
    for (size_t i = 0; i < v.as_list().size(); ++i) {
      absl::Status s = Skeleton(op, v.as_list()[i], axis,
                                Child(path, Value(static_cast<int64_t>(i))),
                                list->add_items(), leaves);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (v.is_map()) {
    proto::StructureMap* map = out->mutable_map();
    for (const auto& [k, x] : v.as_map()) {
      map->add_keys(k);
      absl::Status s = Skeleton(op, x, axis, Child(path, Value(k)),
                                map->add_values(), leaves);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return op.BadInput(absl::StrCat(
      path, " is a ", v.kind_name(),
      ": all_gather along an axis takes tensors, in lists and maps"));
}

absl::Status Leaves(const Op& op, int from, const proto::Structure& s,
                    std::vector<const proto::TensorMeta*>* out) {
  switch (s.node_case()) {
    case proto::Structure::kTensor:
      out->push_back(&s.tensor());
      return CheckMeta(op, from, s.tensor());
    case proto::Structure::kList:
      for (const proto::Structure& x : s.list().items()) {
        absl::Status ok = Leaves(op, from, x, out);
        if (!ok.ok()) return ok;
      }
      return absl::OkStatus();
    case proto::Structure::kMap:
      if (s.map().keys_size() != s.map().values_size())
        return op.Malformed(from, "a map's keys and values differ in number");
      for (const proto::Structure& x : s.map().values()) {
        absl::Status ok = Leaves(op, from, x, out);
        if (!ok.ok()) return ok;
      }
      return absl::OkStatus();
    default:
      return op.Malformed(from, "a structure with an empty node");
  }
}

absl::Status SameStructure(const Op& op, int r, const proto::Structure& s,
                           const proto::Structure& s0, int64_t axis,
                           const std::string& path) {
  auto differ = [&](absl::string_view why) {
    return Mismatch(op, r, path, Describe(s), absl::StrCat(Describe(s0), why));
  };
  if (s.node_case() != s0.node_case()) return differ("");
  if (s0.has_tensor()) {
    const proto::TensorMeta &t = s.tensor(), &t0 = s0.tensor();
    if (t.dtype() != t0.dtype() || t.shape_size() != t0.shape_size())
      return differ("");
    const int64_t a = axis < 0 ? axis + t0.shape_size() : axis;
    for (int d = 0; d < t0.shape_size(); ++d) {
      if (d != a && t.shape(d) != t0.shape(d)) {
        return differ(
            absl::StrCat(" (shapes may differ only along axis ", axis, ")"));
      }
    }
    return absl::OkStatus();
  }
  if (s0.has_list()) {
    const auto &items = s.list().items(), &items0 = s0.list().items();
    if (items.size() != items0.size()) return differ("");
    for (int i = 0; i < items0.size(); ++i) {
      absl::Status ok =
          SameStructure(op, r, items[i], items0[i], axis,
                        Child(path, Value(static_cast<int64_t>(i))));
      if (!ok.ok()) return ok;
    }
    return absl::OkStatus();
  }
  const proto::StructureMap &m = s.map(), &m0 = s0.map();
  if (m.keys_size() != m0.keys_size()) return differ("");
  for (int i = 0; i < m0.keys_size(); ++i) {
    if (m.keys(i) != m0.keys(i)) return differ("");
    absl::Status ok = SameStructure(op, r, m.values(i), m0.values(i), axis,
                                    Child(path, Value(m0.keys(i))));
    if (!ok.ok()) return ok;
  }
  return absl::OkStatus();
}

}  // namespace ferry
