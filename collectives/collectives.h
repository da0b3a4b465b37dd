// Collectives: the C++ API. One function per collective, synchronous, and
// an Async form returning a Work handle; every member of the group calls
// the same collectives in the same order (or names them with
// CollectiveOptions::tag).
//
//   ProcessGroup& world = worker.world();  // ferry::Worker (worker.h)
//   absl::StatusOr<Tensor> sum = AllReduce(world, grad, ReduceOp::kAvg);
//   absl::StatusOr<Tensor> mine =
//       AllToAllSingle(world, ids, /*output_splits=*/{}, splits);
//
// Forms writing into the caller's tensors: into.h; point-to-point: p2p.h.
//
// Async forms hold no thread while they wait for their peers (each step
// goes on from the arrival of its messages), so any number of them
// progress at once; they keep the group alive until they finish. A sync
// form waits on its caller's thread.
//
// Every call is bounded by its timeout (default: the worker's). Errors are
// the same on every member: INVALID_ARGUMENT naming the rank and field for
// bad or mismatched inputs, DEADLINE_EXCEEDED naming the ranks that never
// joined, UNAVAILABLE naming a member that died. After a failure the group
// works for the next op. Semantics of each collective: docs/DESIGN.md
// "Collectives", collectives/algorithms/algorithms.h and by_name.h.
#ifndef FERRY_COLLECTIVES_COLLECTIVES_H_
#define FERRY_COLLECTIVES_COLLECTIVES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/algorithms/reduce_op.h"
#include "collectives/op/options.h"
#include "collectives/op/process_group.h"
#include "collectives/op/work.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// Rank r sends inputs[i] to rank i; returns what each rank sent here, by
// source rank. Shapes may differ; one dtype across the group.
absl::StatusOr<std::vector<Tensor>> AllToAll(
    ProcessGroup& group, const std::vector<Tensor>& inputs,
    const CollectiveOptions& options = {});
Work<std::vector<Tensor>> AllToAllAsync(ProcessGroup& group,
                                        const std::vector<Tensor>& inputs,
                                        const CollectiveOptions& options = {});

// `input` split on dim 0 by `input_splits` (empty: evenly); returns the
// pieces received, concatenated in source order. `output_splits` (empty:
// whatever arrives) is checked against what the others send.
absl::StatusOr<Tensor> AllToAllSingle(
    ProcessGroup& group, const Tensor& input,
    const std::vector<int64_t>& output_splits = {},
    const std::vector<int64_t>& input_splits = {},
    const CollectiveOptions& options = {});
Work<Tensor> AllToAllSingleAsync(ProcessGroup& group, const Tensor& input,
                                 const std::vector<int64_t>& output_splits = {},
                                 const std::vector<int64_t>& input_splits = {},
                                 const CollectiveOptions& options = {});

// Every rank's tensor, by rank (shapes may differ).
absl::StatusOr<std::vector<Tensor>> AllGather(
    ProcessGroup& group, const Tensor& input,
    const CollectiveOptions& options = {});
Work<std::vector<Tensor>> AllGatherAsync(ProcessGroup& group,
                                         const Tensor& input,
                                         const CollectiveOptions& options = {});

// tf's form: `value` is a nested structure (lists, maps) of tensors of
// rank ≥ 1, the same on every rank except along `axis`; returns the same
// structure with every rank's tensors concatenated along `axis`.
absl::StatusOr<Value> AllGather(ProcessGroup& group, const Value& value,
                                int64_t axis,
                                const CollectiveOptions& options = {});
Work<Value> AllGatherAsync(ProcessGroup& group, const Value& value,
                           int64_t axis, const CollectiveOptions& options = {});

absl::StatusOr<Tensor> AllReduce(ProcessGroup& group, const Tensor& input,
                                 ReduceOp op = ReduceOp::kSum,
                                 const CollectiveOptions& options = {});
Work<Tensor> AllReduceAsync(ProcessGroup& group, const Tensor& input,
                            ReduceOp op = ReduceOp::kSum,
                            const CollectiveOptions& options = {});

// Returns the reduction over ranks of every rank's inputs[rank].
absl::StatusOr<Tensor> ReduceScatter(ProcessGroup& group,
                                     const std::vector<Tensor>& inputs,
                                     ReduceOp op = ReduceOp::kSum,
                                     const CollectiveOptions& options = {});
Work<Tensor> ReduceScatterAsync(ProcessGroup& group,
                                const std::vector<Tensor>& inputs,
                                ReduceOp op = ReduceOp::kSum,
                                const CollectiveOptions& options = {});

// The reduction of every rank's `input` on rank dst (elsewhere the result
// is the input itself).
absl::StatusOr<Tensor> Reduce(ProcessGroup& group, const Tensor& input, int dst,
                              ReduceOp op = ReduceOp::kSum,
                              const CollectiveOptions& options = {});
Work<Tensor> ReduceAsync(ProcessGroup& group, const Tensor& input, int dst,
                         ReduceOp op = ReduceOp::kSum,
                         const CollectiveOptions& options = {});

// Rank src's `value` (any value) on every rank; others' `value` is ignored.
absl::StatusOr<Value> Broadcast(ProcessGroup& group, const Value& value,
                                int src, const CollectiveOptions& options = {});
Work<Value> BroadcastAsync(ProcessGroup& group, const Value& value, int src,
                           const CollectiveOptions& options = {});

// Rank src's values[i] on rank i; others' `values` are ignored.
absl::StatusOr<Value> Scatter(ProcessGroup& group,
                              const std::vector<Value>& values, int src,
                              const CollectiveOptions& options = {});
Work<Value> ScatterAsync(ProcessGroup& group, const std::vector<Value>& values,
                         int src, const CollectiveOptions& options = {});

// Every rank's `value` on rank dst (empty elsewhere).
absl::StatusOr<std::vector<Value>> Gather(
    ProcessGroup& group, const Value& value, int dst,
    const CollectiveOptions& options = {});
Work<std::vector<Value>> GatherAsync(ProcessGroup& group, const Value& value,
                                     int dst,
                                     const CollectiveOptions& options = {});

absl::Status Barrier(ProcessGroup& group,
                     const CollectiveOptions& options = {});
Work<Done> BarrierAsync(ProcessGroup& group,
                        const CollectiveOptions& options = {});

// Any collective by name, over Values shaped like ferryctl's request JSON
// (by_name.h): what ferryctl and other clients drive.
absl::StatusOr<Value> RunCollective(ProcessGroup& group, absl::string_view name,
                                    const Value& input, const Value& params,
                                    const CollectiveOptions& options = {});
Work<Value> RunCollectiveAsync(ProcessGroup& group, absl::string_view name,
                               Value input, Value params,
                               const CollectiveOptions& options = {});

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_COLLECTIVES_H_
