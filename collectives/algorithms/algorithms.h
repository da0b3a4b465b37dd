// The collective algorithms, typed: each takes its op's Result and this
// rank's input, and sets the result (or fails the op) from a continuation
// (op.h). One file per collective; the Value forms of ferryctl and clients
// are parsed before (by_name.h).
//
// Contracts shared by all:
// - This rank's bad input → INVALID_ARGUMENT naming this rank and the
//   field, before anything is sent (the op then fails on every member).
// - Inputs that disagree across ranks → INVALID_ARGUMENT naming the first
//   rank that differs from rank 0, computed from data every rank holds, so
//   every rank reports the same error.
// - A message unlike what the algorithm sends → INTERNAL naming its
//   sender.
// - Each message of an op has its own step number, within op_key.h's
//   MaxSteps; algorithms that use others' schedules pass the first step
//   those may use.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_ALGORITHMS_H_
#define FERRY_COLLECTIVES_ALGORITHMS_ALGORITHMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms/kjt.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/op/op.h"
#include "collectives/op/tensor_out.h"
#include "rpc/base/future.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {
namespace algorithms {

// Dissemination barrier.
void Barrier(Result<Done> result);

// The value of rank `src` everywhere (others' values ignored). `into`
// (optional, for a tensor value): where a rank other than src receives
// it.
struct BroadcastArgs {
  Value value;
  int src = 0;
  TensorOut into;
};
void Broadcast(Result<Value> result, BroadcastArgs args);

// Rank `src`'s values[i] on rank i (others' values ignored). `into`
// (optional, for tensor values): where this rank's is written.
struct ScatterArgs {
  std::vector<Value> values;
  int src = 0;
  TensorOut into;
};
void Scatter(Result<Value> result, ScatterArgs args);

// Every rank's value on rank `dst`, by rank (empty elsewhere). `into`
// (optional, for tensor values; one per rank, on dst): where each rank's
// tensor is written.
struct GatherArgs {
  Value value;
  int dst = 0;
  std::vector<TensorOut> into;
};
void Gather(Result<std::vector<Value>> result, GatherArgs args);

// inputs[i] to rank i; what each rank sent here, by source rank.
// `into` (optional; one per rank): where each rank's tensor is written.
struct AllToAllArgs {
  std::vector<Tensor> inputs;
  std::vector<TensorOut> into;
};
void AllToAll(Result<std::vector<Tensor>> result, AllToAllArgs args);
void AllToAll(Result<std::vector<Tensor>> result, std::vector<Tensor> inputs);

// `input` split on dim 0 by input_splits (empty: evenly); the rows
// received, in source order, checked against output_splits (empty: any).
// `into` (optional): where the rows received are written.
struct AllToAllSingleArgs {
  Tensor input;
  std::vector<int64_t> input_splits;
  std::vector<int64_t> output_splits;
  TensorOut into;
};
void AllToAllSingle(Result<Tensor> result, AllToAllSingleArgs args);

// Every rank's tensor (torch's list form; shapes may differ). `into`
// (optional; one per rank): where each rank's tensor is written.
struct AllGatherArgs {
  Tensor input;
  std::vector<TensorOut> into;
};
void AllGather(Result<std::vector<Tensor>> result, AllGatherArgs args);
void AllGather(Result<std::vector<Tensor>> result, Tensor input);
// tf's form: a nested structure (lists, maps) of tensors of rank ≥ 1, the
// same on every rank except along `axis`, concatenated leaf by leaf.
struct AllGatherAxisArgs {
  Value value;
  int64_t axis = 0;
};
void AllGatherAlongAxis(Result<Value> result, AllGatherAxisArgs args);

// The elementwise reduction of every rank's tensor (same shape everywhere).
// `into` (optional; the input's dtype and shape): where the result is
// written — caller memory, which may be the input's own (in place).
struct AllReduceArgs {
  Tensor input;
  ReduceOp op = ReduceOp::kSum;
  TensorOut into;
};
void AllReduce(Result<Tensor> result, AllReduceArgs args);

// The reduction over ranks of every rank's blocks[rank]. `into`
// (optional): where it is written.
struct ReduceScatterArgs {
  std::vector<Tensor> blocks;
  ReduceOp op = ReduceOp::kSum;
  TensorOut into;
};

// The reduction of every rank's tensor on rank `dst` (a tensor like it;
// elsewhere the input as it was). `into` (optional, used on dst): where
// it is written — dst's input's own memory included (in place).
struct ReduceArgs {
  Tensor input;
  int dst = 0;
  ReduceOp op = ReduceOp::kSum;
  TensorOut into;
};
void Reduce(Result<Tensor> result, ReduceArgs args);
void ReduceScatter(Result<Tensor> result, ReduceScatterArgs args);

// The jagged all-to-all (kjt_all_to_all.cc) of one or more KJTs at once
// (SparseFeaturesAllToAll moves two): rank r receives features_per_rank[r]
// consecutive keys of every part from every rank, the batches concatenated
// in TorchRec's staggered source order. Outputs by part.
struct JaggedPart {
  std::string name;  // "kjt", "id_list": names the part in errors.
  KeyedJaggedTensor kjt;
  // Keys per destination, in order; empty: none to anyone.
  std::vector<int64_t> features_per_rank;
  std::string features_field;  // "features_per_rank", in errors.
};
struct JaggedArgs {
  std::vector<JaggedPart> parts;
  int64_t stagger = 1;
};
void JaggedAllToAll(Result<std::vector<KeyedJaggedTensor>> result,
                    JaggedArgs args);

}  // namespace algorithms
}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_ALGORITHMS_H_
