// The schedules shared by all_gather, reduce_scatter and all_reduce: the
// direct reduction of small payloads, and the rings for large ones: each rank
// talks only to its neighbours, passing one block per step, so every link
// carries the same load.
//
// Blocks are indexed by group rank. `skip[b]` (the same on every rank)
// marks blocks that do not travel the ring — those already exchanged
// directly — so a mix of small and large blocks costs one ring, not two.
// Each schedule uses steps [first_step, first_step + size - 1).
#ifndef FERRY_COLLECTIVES_RING_H_
#define FERRY_COLLECTIVES_RING_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/op.h"
#include "collectives/reduce.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// On entry blocks[rank] is this rank's block (and skipped blocks are
// whatever the caller has); on success every non-skipped block is filled.
absl::Status RingAllGather(Op& op, int first_step, std::vector<Value>& blocks,
                           const std::vector<bool>& skip);

// blocks[b] is this rank's contribution to block b (same shape and dtype on
// every rank). Returns the reduction over ranks of block `rank` (unless it
// is skipped: then an empty tensor). Averages are left as sums.
absl::StatusOr<Tensor> RingReduceScatter(Op& op, int first_step,
                                         const std::vector<Tensor>& blocks,
                                         const std::vector<bool>& skip,
                                         ReduceOp reduce);

// The reduction of `parts` (one per group rank, each a tensor like `like`
// from that rank) in rank order, so every rank computing it gets the same
// bits; averages are left as sums.
absl::StatusOr<Tensor> ReduceInRankOrder(const Op& op,
                                         const std::vector<Value>& parts,
                                         const Tensor& like, ReduceOp reduce);

// The start of a rooted op whose data flows one way (broadcast, scatter):
// every other rank tells `root` it is here (step `step`) and returns at
// once; `root` returns once it has heard from all. Root sends nothing
// before that, so a rank that never joins fails the op on every rank that
// did (root times out and aborts the op), as in every other collective.
absl::Status JoinAtRoot(Op& op, int root, int step);

// A new tensor holding `a` ⊕ `b` (same dtype and numel), shaped like `a`.
absl::StatusOr<Tensor> Combine(ReduceOp reduce, const Tensor& a,
                               const Tensor& b);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_RING_H_
