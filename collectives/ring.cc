#include "collectives/ring.h"

#include <cstring>
#include <utility>

#include "collectives/args.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {
int Mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

absl::Status RingAllGather(Op& op, int first_step, std::vector<Value>& blocks,
                           const std::vector<bool>& skip) {
  const int n = op.size(), r = op.rank();
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  // At step s each rank forwards the block it got at step s-1 (its own at
  // step 0), so after n-1 steps every block went around the ring.
  for (int s = 0; s + 1 < n; ++s) {
    const int out = Mod(r - s, n), in = Mod(r - s - 1, n);
    if (!skip[out]) op.Send(next, first_step + s, blocks[out]);
    if (skip[in]) continue;
    FERRY_ASSIGN_OR_RETURN(blocks[in], op.Recv(prev, first_step + s));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ReduceInRankOrder(const Op& op,
                                         const std::vector<Value>& parts,
                                         const Tensor& like, ReduceOp reduce) {
  FERRY_ASSIGN_OR_RETURN(TensorBuilder acc,
                         TensorBuilder::Create(like.dtype(), like.shape()));
  for (int r = 0; r < op.size(); ++r) {
    FERRY_ASSIGN_OR_RETURN(Tensor part, TensorLike(op, parts[r], r, like));
    if (r == 0) {
      if (part.nbytes() > 0)
        std::memcpy(acc.data(), part.data(), part.nbytes());
    } else {
      ReduceInto(reduce, like.dtype(), acc.data(), part.data(), like.numel());
    }
  }
  return std::move(acc).Build();
}

absl::Status JoinAtRoot(Op& op, int root, int step) {
  const int n = op.size();
  if (op.rank() != root) {
    op.Send(root, step, Value());
    return absl::OkStatus();
  }
  for (int k = 1; k < n; ++k)
    FERRY_RETURN_IF_ERROR(op.Recv((root + k) % n, step).status());
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Combine(ReduceOp reduce, const Tensor& a,
                               const Tensor& b) {
  FERRY_ASSIGN_OR_RETURN(TensorBuilder out,
                         TensorBuilder::Create(a.dtype(), a.shape()));
  if (a.nbytes() > 0) std::memcpy(out.data(), a.data(), a.nbytes());
  ReduceInto(reduce, a.dtype(), out.data(), b.data(), a.numel());
  return std::move(out).Build();
}

absl::StatusOr<Tensor> RingReduceScatter(Op& op, int first_step,
                                         const std::vector<Tensor>& blocks,
                                         const std::vector<bool>& skip,
                                         ReduceOp reduce) {
  const int n = op.size(), r = op.rank();
  const int next = Mod(r + 1, n), prev = Mod(r - 1, n);
  if (n == 1) return skip[0] ? Tensor() : blocks[0];
  // At step s a rank sends its partial of block r-s-1 (its own contribution
  // at step 0) and adds its contribution to the partial of block r-s-2 it
  // receives; the partial of block r arrives last, with every other rank's
  // contribution in it.
  Tensor partial;
  for (int s = 0; s + 1 < n; ++s) {
    const int out = Mod(r - s - 1, n), in = Mod(r - s - 2, n);
    if (!skip[out])
      op.Send(next, first_step + s, s == 0 ? blocks[out] : partial);
    if (skip[in]) continue;
    FERRY_ASSIGN_OR_RETURN(Value got, op.Recv(prev, first_step + s));
    FERRY_ASSIGN_OR_RETURN(Tensor theirs,
                           TensorLike(op, got, prev, blocks[in]));
    FERRY_ASSIGN_OR_RETURN(partial, Combine(reduce, blocks[in], theirs));
  }
  return skip[r] ? Tensor() : partial;
}

}  // namespace ferry
