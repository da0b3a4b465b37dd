// The schedules shared by the collectives: the rooted join, the direct
// reduction of small payloads, and the rings for large ones — each rank
// talks only to its neighbours, passing one block per step, so every link
// carries the same load. Each goes on by continuations (op.h): `then` runs
// once the schedule is done here; if the op fails meanwhile it never runs.
//
// Blocks are indexed by group rank. `skip[b]` (the same on every rank)
// marks blocks that do not travel the ring — those already exchanged
// directly — so a mix of small and large blocks costs one ring, not two.
// Each ring uses steps [first_step, first_step + size - 1).
#ifndef FERRY_COLLECTIVES_ALGORITHMS_RING_H_
#define FERRY_COLLECTIVES_ALGORITHMS_RING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/op/message.h"
#include "collectives/op/op.h"
#include "collectives/op/tensor_out.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {

// The start of a rooted op whose data flows one way (broadcast, scatter):
// every other rank tells `root` it is here (step `step`) and goes on at
// once; `root` goes on once it heard from all. Root sends nothing before
// that, so a rank that never joins fails the op on every rank that did
// (root times out and aborts the op), as in every other collective.
void JoinAtRoot(Op& op, int root, int step, absl::AnyInvocable<void() &&> then);

// On entry blocks[rank] is this rank's block (and skipped blocks are
// whatever the caller has); `then` gets every block, each non-skipped one
// as its owner sent it. `land[b]`, if given, is where block b's tensor is
// received (Op::Landings).
using Blocks = std::vector<Message>;
void RingAllGather(Op& op, int first_step, Blocks blocks,
                   std::vector<bool> skip,
                   absl::AnyInvocable<void(Blocks) &&> then,
                   Op::Landings land = {});

struct RingReduce {
  int first_step = 1;
  // This rank's contribution to each block (the same dtype and size on
  // every rank).
  std::vector<Tensor> blocks;
  std::vector<bool> skip;
  ReduceOp reduce = ReduceOp::kSum;
  // Optional: partial sums of block b go to `into`'s elements from
  // offsets[b] on (all_reduce: its output), instead of a new tensor each.
  std::shared_ptr<TensorBuilder> into;
  std::vector<int64_t> offsets;
  // `into` is the blocks' own memory (an all_reduce in place): the
  // partials from the previous rank are then received into a buffer of
  // their own, not over the contribution they are added to.
  bool into_is_input = false;
  // Optional: where the sum of this rank's own block goes (reduce_scatter's
  // output), instead of `into` or a new tensor.
  TensorOut own_into;
};
// `then` gets the reduction over ranks of block `rank` (an empty tensor if
// it is skipped; averages left as sums).
void RingReduceScatter(Op& op, RingReduce args,
                       absl::AnyInvocable<void(Tensor) &&> then);

// Whether a peer's tensor `t` can stand for `like` (dtype and size).
bool Like(const Tensor& t, const Tensor& like);

// The reduction of `parts` (one per group rank, each Like `like`) in rank
// order, so every rank computing it gets the same bits; shaped like
// `like`; averages left as sums.
absl::StatusOr<Tensor> ReduceInRankOrder(const std::vector<Tensor>& parts,
                                         const Tensor& like, ReduceOp reduce);
// The same into `out`: room for one part, overlapping none, or exactly
// one of the parts (a reduction in place).
void ReduceInRankOrderTo(const std::vector<Tensor>& parts, ReduceOp reduce,
                         char* out);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_RING_H_
