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
#include "rpc/status_util.h"

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
  Value::List metas;
  for (int b = 0; b < n; ++b) {
    direct[b] =
        static_cast<int64_t>(blocks[b].nbytes()) <= op.config().direct_bytes;
    metas.push_back(TensorMeta(blocks[b]));
  }
  const std::string reduce_name(ReduceOpName(reduce));
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n;
    op.Send(
        to, 0,
        Value(Value::Map{{"metas", metas},
                         {"op", reduce_name},
                         {"data", direct[to] ? Value(blocks[to]) : Value()}}));
  }
  std::vector<Value> got(n), all_metas(n), ops(n);
  got[me] = Value(blocks[me]);
  all_metas[me] = Value(metas);
  ops[me] = reduce_name;
  for (int k = 1; k < n; ++k) {
    const int from = (me - k + n) % n;
    FERRY_ASSIGN_OR_RETURN(Value m, op.Recv(from, 0));
    FERRY_ASSIGN_OR_RETURN(const Value* their_metas,
                           Part(op, m, "metas", from));
    FERRY_ASSIGN_OR_RETURN(const Value* their_op, Part(op, m, "op", from));
    FERRY_ASSIGN_OR_RETURN(const Value* data, Part(op, m, "data", from));
    all_metas[from] = *their_metas;
    ops[from] = *their_op;
    got[from] = *data;
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, ops, "op"));
  for (int b = 0; b < n; ++b) {
    std::vector<Value> block_metas;
    for (int r = 0; r < n; ++r) {
      const Value& m = all_metas[r];
      if (!m.is_list() || static_cast<int>(m.as_list().size()) != n) {
        return Malformed(op, r, "expected one block description per rank");
      }
      block_metas.push_back(m.as_list()[b]);
    }
    FERRY_RETURN_IF_ERROR(
        CheckSameMeta(op, block_metas, absl::StrCat("input[", b, "]")));
  }
  // Same shapes everywhere: every rank agrees on which blocks are direct.
  Tensor result;
  if (direct[me]) {
    const Tensor& mine = blocks[me];
    FERRY_ASSIGN_OR_RETURN(TensorBuilder acc,
                           TensorBuilder::Create(mine.dtype(), mine.shape()));
    for (int r = 0; r < n; ++r) {
      FERRY_ASSIGN_OR_RETURN(Tensor data, TensorLike(op, got[r], r, mine));
      if (r == 0) {
        if (data.nbytes() > 0)
          std::memcpy(acc.data(), data.data(), data.nbytes());
      } else {
        ReduceInto(reduce, mine.dtype(), acc.data(), data.data(), mine.numel());
      }
    }
    result = std::move(acc).Build();
  }
  FERRY_ASSIGN_OR_RETURN(Tensor ringed,
                         RingReduceScatter(op, 1, blocks, direct, reduce));
  if (!direct[me]) result = ringed;
  if (reduce == ReduceOp::kAvg) result = Averaged(result, n);
  return Value(std::move(result));
}

}  // namespace algorithms
}  // namespace ferry
