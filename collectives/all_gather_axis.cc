// all_gather along an axis (tf's form): every rank holds a nested
// structure (lists, maps) of tensors of rank ≥ 1, the same on every rank
// except along the axis; every rank ends with the structure whose tensors
// are every rank's, concatenated along the axis in rank order.
//
// It is the list form's exchange (gather_tensors.h) over the structure's
// tensors, in order, with the structure itself in the header (a Structure:
// metadata only). Every rank compares every rank's structure with rank 0's
// before any large tensor travels, so a mismatch names the place in the
// structure where the first differing rank differs, identically everywhere.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/checks.h"
#include "collectives/gather_tensors.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor_math.h"

namespace ferry {
namespace algorithms {

namespace {

// value["a"][1]
std::string Child(const std::string& path, const Value& key) {
  return absl::StrCat(path, "[", ToJson(key), "]");
}

// The structure of `v` (its tensors' metadata) and its tensors in order;
// this rank's INVALID_ARGUMENT for anything but lists, maps and tensors of
// rank ≥ 1 with `axis` in range.
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

// A peer's structure, checked before it is read: every node set, its
// metadata printable, and its tensors' metadata in order.
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

std::string Describe(const proto::Structure& s) {
  if (s.has_tensor()) return MetaString(s.tensor());
  if (s.has_list()) return absl::StrCat("a list of ", s.list().items_size());
  Value::List keys(s.map().keys().begin(), s.map().keys().end());
  return absl::StrCat("a map with keys ", ToJson(Value(std::move(keys))));
}

// Rank r's structure `s` against rank 0's `s0` (both checked by Leaves).
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

// Every rank's header: the same axis, and a structure like rank 0's.
absl::Status CheckHeaders(const Op& op,
                          const std::vector<proto::AllGatherHeader>& h,
                          int64_t axis) {
  std::vector<std::string> axes;
  for (int r = 0; r < op.size(); ++r) {
    if (!h[r].along_axis())
      return Mismatch(op, r, "all_gather", "the list form", "along an axis");
    std::vector<const proto::TensorMeta*> leaves;
    absl::Status ok = Leaves(op, r, h[r].structure(), &leaves);
    if (!ok.ok()) return ok;
    axes.push_back(absl::StrCat(h[r].axis()));
  }
  absl::Status same = CheckSame(op, axes, "axis");
  for (int r = 1; r < op.size() && same.ok(); ++r) {
    same =
        SameStructure(op, r, h[r].structure(), h[0].structure(), axis, "value");
  }
  return same;
}

// `v`'s structure with its tensors (leaf `*next` on) replaced by every
// rank's, concatenated.
absl::StatusOr<Value> Join(const Value& v,
                           const std::vector<std::vector<Tensor>>& all,
                           int64_t axis, size_t* next) {
  if (v.is_tensor()) {
    std::vector<Tensor> parts;
    for (const std::vector<Tensor>& leaves : all)
      parts.push_back(leaves[*next]);
    ++*next;
    absl::StatusOr<Tensor> joined = Concat(parts, axis);
    if (!joined.ok()) return joined.status();
    return Value(*std::move(joined));
  }
  if (v.is_list()) {
    Value::List out;
    for (const Value& x : v.as_list()) {
      absl::StatusOr<Value> joined = Join(x, all, axis, next);
      if (!joined.ok()) return joined;
      out.push_back(*std::move(joined));
    }
    return Value(std::move(out));
  }
  Value::Map out;
  for (const auto& [k, x] : v.as_map()) {
    absl::StatusOr<Value> joined = Join(x, all, axis, next);
    if (!joined.ok()) return joined;
    out[k] = *std::move(joined);
  }
  return Value(std::move(out));
}

void Gathered(Result<Value> result, const Value& mine, int64_t axis,
              const std::vector<proto::AllGatherHeader>& headers,
              const std::vector<std::vector<Tensor>>& all) {
  Op& op = result.op();
  // Each rank's tensors as its header says (a sender's always are, unless
  // it is malformed): Join relies on it.
  for (int r = 0; r < op.size(); ++r) {
    std::vector<const proto::TensorMeta*> leaves;
    absl::Status ok = Leaves(op, r, headers[r].structure(), &leaves);
    if (!ok.ok()) return op.Fail(ok);
    bool like = leaves.size() == all[r].size();
    for (size_t i = 0; like && i < leaves.size(); ++i)
      like = Matches(all[r][i], *leaves[i]);
    if (!like) return op.Fail(op.Malformed(r, "a value unlike its metadata"));
  }
  size_t next = 0;
  absl::StatusOr<Value> out = Join(mine, all, axis, &next);
  if (!out.ok()) return op.Fail(out.status());
  std::move(result).Set(*std::move(out));
}

}  // namespace

void AllGatherAlongAxis(Result<Value> result, AllGatherAxisArgs args) {
  Op& op = result.op();
  proto::AllGatherHeader header;
  header.set_along_axis(true);
  header.set_axis(args.axis);
  std::vector<Tensor> leaves;
  absl::Status ok = Skeleton(op, args.value, args.axis, "value",
                             header.mutable_structure(), &leaves);
  if (!ok.ok()) return op.Fail(ok);
  const int64_t axis = args.axis;
  GatherTensors(
      op, std::move(header), std::move(leaves),
      [&op, axis](const std::vector<proto::AllGatherHeader>& h) {
        return CheckHeaders(op, h, axis);
      },
      [result = std::move(result), mine = std::move(args.value), axis](
          std::vector<proto::AllGatherHeader> headers,
          std::vector<std::vector<Tensor>> all) mutable {
        Gathered(std::move(result), mine, axis, headers, all);
      });
}

}  // namespace algorithms
}  // namespace ferry
