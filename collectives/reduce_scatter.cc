// reduce_scatter: rank r ends with the reduction over ranks of every rank's
// r-th block.
//
// Step 0 sends each rank the metadata of all n blocks and the reduce op
// (so every rank checks every rank's input identically), with the block
// destined to it when that block is small; small blocks are reduced in rank
// order where they land. Large blocks travel the ring as partial sums
// (steps 1..).
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

namespace {

// A list of n tensors, or one tensor cut evenly into n blocks on dim 0.
absl::StatusOr<std::vector<Tensor>> Blocks(const Op& op, const Value& input) {
  const int n = op.size();
  if (!input.is_tensor()) return TensorListArg(op, input, n, "input");
  const Tensor& t = input.as_tensor();
  if (t.rank() == 0 || t.dim(0) % n != 0) {
    return op.BadInput(absl::StrCat(
        "input ", t.DebugString(), " cannot be cut into ", n,
        " equal blocks along dimension 0; pass a list of ", n, " tensors"));
  }
  std::vector<Tensor> blocks;
  const int64_t rows = t.dim(0) / n;
  for (int i = 0; i < n; ++i) {
    FERRY_ASSIGN_OR_RETURN(Tensor b, t.Rows(i * rows, (i + 1) * rows));
    blocks.push_back(std::move(b));
  }
  return blocks;
}

}  // namespace

absl::StatusOr<Value> ReduceScatter(Op& op, const Value& input,
                                    const Value& params) {
  const int n = op.size(), me = op.rank();
  FERRY_ASSIGN_OR_RETURN(std::vector<Tensor> blocks, Blocks(op, input));
  FERRY_ASSIGN_OR_RETURN(ReduceOp reduce,
                         ReduceParam(op, params, blocks[0].dtype()));
  std::vector<bool> direct(n);
  Value::List metas, directs;
  for (int b = 0; b < n; ++b) {
    direct[b] =
        static_cast<int64_t>(blocks[b].nbytes()) <= op.config().direct_bytes;
    metas.push_back(TensorMeta(blocks[b]));
    directs.push_back(Value(static_cast<bool>(direct[b])));
  }
  const Value header(Value::Map{{"metas", metas},
                                {"direct", directs},
                                {"op", std::string(ReduceOpName(reduce))}});
  FERRY_ASSIGN_OR_RETURN(
      std::vector<Value> got, op.ExchangeEach(0, [&](int to) {
        Value m = header;
        m.as_map()["data"] = direct[to] ? Value(blocks[to]) : Value();
        return m;
      }));
  std::vector<Value> ops(n), data(n);
  std::vector<std::vector<Value>> block_metas(n);
  std::vector<bool> skip(n, true);  // Direct blocks skip the ring.
  for (int r = 0; r < n; ++r) {
    FERRY_ASSIGN_OR_RETURN(const Value* m, Part(op, got[r], "metas", r));
    FERRY_ASSIGN_OR_RETURN(const Value* d, Part(op, got[r], "direct", r));
    FERRY_ASSIGN_OR_RETURN(const Value* o, Part(op, got[r], "op", r));
    FERRY_ASSIGN_OR_RETURN(const Value* x, Part(op, got[r], "data", r));
    if (!m->is_list() || static_cast<int>(m->as_list().size()) != n ||
        !d->is_list() || static_cast<int>(d->as_list().size()) != n) {
      return Malformed(op, r, "expected one block description per rank");
    }
    for (int b = 0; b < n; ++b) {
      block_metas[b].push_back(m->as_list()[b]);
      // A block goes direct only if every rank sent it so.
      const Value& flag = d->as_list()[b];
      skip[b] = skip[b] && flag.is_bool() && flag.as_bool();
    }
    ops[r] = *o;
    data[r] = *x;
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, ops, "op"));
  for (int b = 0; b < n; ++b) {
    FERRY_RETURN_IF_ERROR(
        CheckSameMeta(op, block_metas[b], absl::StrCat("input[", b, "]")));
  }
  FERRY_ASSIGN_OR_RETURN(Tensor ringed,
                         RingReduceScatter(op, 1, blocks, skip, reduce));
  Tensor result = ringed;
  if (skip[me]) {
    FERRY_ASSIGN_OR_RETURN(result,
                           ReduceInRankOrder(op, data, blocks[me], reduce));
  }
  return Value(reduce == ReduceOp::kAvg ? Averaged(result, n) : result);
}

}  // namespace algorithms
}  // namespace ferry
