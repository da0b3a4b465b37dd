// all_to_all: rank r sends its i-th block to rank i and receives rank i's
// r-th block, for every i.
//
// One step, pairwise shifted: rank r sends to r+1, r+2, … and receives from
// r-1, r-2, …, so no rank is everyone's first destination. Sizes need not
// be known in advance — each message says how big it is — so uneven splits
// cost no extra round. Each rank receives a block from every rank, hence
// learns every rank's dtype and row shape, and checks them identically.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "rpc/status_util.h"
#include "rpc/tensor_math.h"

namespace ferry {
namespace algorithms {

namespace {

// Sends blocks[i] to rank i; the blocks received, by source rank.
absl::StatusOr<std::vector<Tensor>> Shuffle(Op& op,
                                            std::vector<Tensor> blocks) {
  const int n = op.size(), r = op.rank();
  for (int k = 1; k < n; ++k)
    op.Send((r + k) % n, 0, Value(blocks[(r + k) % n]));
  std::vector<Tensor> got(n);
  got[r] = std::move(blocks[r]);
  for (int k = 1; k < n; ++k) {
    const int from = (r - k + n) % n;
    FERRY_ASSIGN_OR_RETURN(Value v, op.Recv(from, 0));
    if (!v.is_tensor()) return Malformed(op, from, "expected a tensor");
    got[from] = v.as_tensor();
  }
  return got;
}

struct SingleArgs {
  Tensor input;
  std::vector<int64_t> input_splits;
  std::optional<std::vector<int64_t>> output_splits;
};

absl::StatusOr<SingleArgs> ParseSingle(const Op& op, const Value& in) {
  const Value* t = in.is_map() ? in.Find("input") : &in;
  if (t == nullptr) return op.BadInput("missing \"input\"");
  SingleArgs a;
  FERRY_ASSIGN_OR_RETURN(a.input, TensorArg(op, *t, "input"));
  if (a.input.rank() == 0)
    return op.BadInput("input is 0-d: it is split along dimension 0");
  const int n = op.size();
  const int64_t rows = a.input.dim(0);
  const Value* splits = in.is_map() ? in.Find("input_splits") : nullptr;
  FERRY_ASSIGN_OR_RETURN(
      std::optional<std::vector<int64_t>> given,
      SplitsArg(op, splits ? *splits : Value(), "input_splits", n));
  if (given) {
    int64_t sum = 0;
    for (int64_t s : *given) sum += s;
    if (sum != rows) {
      return op.BadInput(absl::StrCat("input_splits add up to ", sum,
                                      " but input has ", rows, " rows"));
    }
    a.input_splits = *std::move(given);
  } else {
    if (rows % n != 0) {
      return op.BadInput(absl::StrCat("input has ", rows,
                                      " rows, not divisible by the group size ",
                                      n, "; pass input_splits"));
    }
    a.input_splits.assign(n, rows / n);
  }
  const Value* out = in.is_map() ? in.Find("output_splits") : nullptr;
  FERRY_ASSIGN_OR_RETURN(
      a.output_splits, SplitsArg(op, out ? *out : Value(), "output_splits", n));
  return a;
}

Value RowMeta(const Tensor& t) {
  Value::List rows;
  for (int i = 1; i < t.rank(); ++i) rows.push_back(Value(t.dim(i)));
  return Value(Value::Map{{"dtype", std::string(DTypeName(t.dtype()))},
                          {"shape", rows}});
}

}  // namespace

absl::StatusOr<Value> AllToAll(Op& op, const Value& input,
                               const Value& /*params*/) {
  FERRY_ASSIGN_OR_RETURN(std::vector<Tensor> blocks,
                         TensorListArg(op, input, op.size(), "input"));
  FERRY_ASSIGN_OR_RETURN(std::vector<Tensor> got,
                         Shuffle(op, std::move(blocks)));
  std::vector<Value> dtypes;
  Value::List out;
  for (Tensor& t : got) {
    dtypes.push_back(std::string(DTypeName(t.dtype())));
    out.push_back(std::move(t));
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, dtypes, "dtype"));
  return Value(std::move(out));
}

absl::StatusOr<Value> AllToAllSingle(Op& op, const Value& input,
                                     const Value& /*params*/) {
  FERRY_ASSIGN_OR_RETURN(SingleArgs a, ParseSingle(op, input));
  std::vector<Tensor> pieces;
  int64_t offset = 0;
  for (int64_t rows : a.input_splits) {
    FERRY_ASSIGN_OR_RETURN(Tensor piece, a.input.Rows(offset, offset + rows));
    pieces.push_back(std::move(piece));
    offset += rows;
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<Tensor> got,
                         Shuffle(op, std::move(pieces)));
  std::vector<Value> metas;
  for (int r = 0; r < op.size(); ++r) {
    if (got[r].rank() == 0) return Malformed(op, r, "a 0-d piece");
    metas.push_back(RowMeta(got[r]));
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, metas, "rows of"));
  if (a.output_splits) {
    for (int r = 0; r < op.size(); ++r) {
      if (got[r].dim(0) != (*a.output_splits)[r]) {
        return op.Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat(op.Who(r), " sent ", got[r].dim(0), " rows to ",
                         op.Who(op.rank()), " but its output_splits[", r,
                         "] is ", (*a.output_splits)[r]));
      }
    }
  }
  FERRY_ASSIGN_OR_RETURN(Tensor out, Concat(got, 0));
  return Value(std::move(out));
}

}  // namespace algorithms
}  // namespace ferry
