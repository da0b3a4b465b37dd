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
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/gather_tensors.h"
#include "collectives/algorithms/structure.h"
#include "collectives/op/checks.h"
#include "rpc/value/tensor_math.h"

namespace ferry {
namespace algorithms {

namespace {

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
