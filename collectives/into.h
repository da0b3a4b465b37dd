// Output forms of the collectives: the results are written into the
// caller's tensors (torch's output arguments) instead of new buffers.
//
//   absl::StatusOr<TensorOut> out =
//       OutputOver(DType::kFloat32, {4}, keep_alive, data, 16);
//   Work<Tensor> w = AllReduceIntoAsync(group, grad, *out);  // may be `grad`
//   absl::StatusOr<Tensor> sum = w.Wait(timeout);  // shares `data`
//
// What a peer sends is received straight into the output when it arrives
// after the op began here (TensorLanding), and copied there otherwise (it
// was held while the op had not begun); this rank's own part is copied.
// The tensors returned share the outputs' memory. The ops, their checks,
// errors and bounds are those of collectives.h; in addition an output of
// another dtype or shape than the result is INVALID_ARGUMENT naming it
// ("output[2] is float32 [3] but the result is float32 [2]"), on this rank
// before anything is sent when the result's shape is known here, else when
// it arrives. Outputs must not overlap the inputs, except where said.
// Output memory is written until the Work is done; on failure its content
// is unspecified.
#ifndef FERRY_COLLECTIVES_INTO_H_
#define FERRY_COLLECTIVES_INTO_H_

#include <cstdint>
#include <vector>

#include "collectives/algorithms/reduce_op.h"
#include "collectives/op/options.h"
#include "collectives/op/process_group.h"
#include "collectives/op/tensor_out.h"
#include "collectives/op/work.h"
#include "rpc/value/tensor.h"

namespace ferry {

// `out` may be `input`'s own memory (torch's in-place all_reduce).
Work<Tensor> AllReduceIntoAsync(ProcessGroup& group, const Tensor& input,
                                TensorOut out, ReduceOp op = ReduceOp::kSum,
                                const CollectiveOptions& options = {});

// outs[i] receives rank i's tensor for this rank.
Work<std::vector<Tensor>> AllToAllIntoAsync(
    ProcessGroup& group, const std::vector<Tensor>& inputs,
    std::vector<TensorOut> outs, const CollectiveOptions& options = {});

// `out` receives the rows from every rank, in rank order (its dim 0 is the
// sum of output_splits; empty output_splits: as many rows from each rank
// as this rank sends it, else copied).
Work<Tensor> AllToAllSingleIntoAsync(
    ProcessGroup& group, const Tensor& input, TensorOut out,
    const std::vector<int64_t>& output_splits = {},
    const std::vector<int64_t>& input_splits = {},
    const CollectiveOptions& options = {});

// outs[i] receives rank i's tensor (views of one tensor give torch's
// all_gather_into_tensor).
Work<std::vector<Tensor>> AllGatherIntoAsync(
    ProcessGroup& group, const Tensor& input, std::vector<TensorOut> outs,
    const CollectiveOptions& options = {});

Work<Tensor> ReduceScatterIntoAsync(ProcessGroup& group,
                                    const std::vector<Tensor>& inputs,
                                    TensorOut out, ReduceOp op = ReduceOp::kSum,
                                    const CollectiveOptions& options = {});

// Rank src's `tensor` into every rank's `out` (on src `out` may be
// `tensor`'s own memory; others' `tensor` is ignored).
Work<Tensor> BroadcastIntoAsync(ProcessGroup& group, const Tensor& tensor,
                                TensorOut out, int src,
                                const CollectiveOptions& options = {});

// Rank src's inputs[i] into rank i's `out` (others' inputs are ignored).
Work<Tensor> ScatterIntoAsync(ProcessGroup& group,
                              const std::vector<Tensor>& inputs, TensorOut out,
                              int src, const CollectiveOptions& options = {});

// Every rank's `input` into dst's outs[rank] (`outs` only on dst). The
// result on dst: the outputs; elsewhere: none.
Work<std::vector<Tensor>> GatherIntoAsync(
    ProcessGroup& group, const Tensor& input, std::vector<TensorOut> outs,
    int dst, const CollectiveOptions& options = {});

// The reduction of every rank's `input` into dst's `out` (which may be
// dst's `input` itself; `out` only on dst). Elsewhere the result is the
// input.
Work<Tensor> ReduceIntoAsync(ProcessGroup& group, const Tensor& input,
                             TensorOut out, int dst,
                             ReduceOp op = ReduceOp::kSum,
                             const CollectiveOptions& options = {});

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_INTO_H_
