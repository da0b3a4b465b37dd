// The collective algorithms, over Values: `input` is this rank's input and
// `params` the op's parameters, both shaped like ferryctl's request JSON
// (DESIGN.md "ferryctl contract"); each returns this rank's output.
//
// Contracts shared by all:
// - This rank's bad input or parameters → INVALID_ARGUMENT naming this rank
//   and the field, returned before anything is sent (the runner then aborts
//   the op on every member).
// - Inputs that disagree across ranks → INVALID_ARGUMENT naming the first
//   rank that differs from rank 0, computed from data every rank holds, so
//   every rank reports the same error.
// - Each message of an op has its own step number; algorithms that call
//   others' helpers pass the first step those may use.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_H_
#define FERRY_COLLECTIVES_ALGORITHMS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/op.h"
#include "rpc/value/value.h"

namespace ferry {
namespace algorithms {

using Algorithm = absl::StatusOr<Value> (*)(Op& op, const Value& input,
                                            const Value& params);

// Dissemination barrier; output null.
absl::StatusOr<Value> Barrier(Op& op, const Value& input, const Value& params);
// params "src"; the value of rank src everywhere (others' inputs ignored).
absl::StatusOr<Value> Broadcast(Op& op, const Value& input,
                                const Value& params);
// params "src"; rank src's input is a list of one value per rank.
absl::StatusOr<Value> Scatter(Op& op, const Value& input, const Value& params);
// params "dst"; rank dst gets the list of every rank's input, others null.
absl::StatusOr<Value> Gather(Op& op, const Value& input, const Value& params);
// Input: a list of one tensor per rank (one dtype); output likewise.
absl::StatusOr<Value> AllToAll(Op& op, const Value& input, const Value& params);
// Input: a tensor, or {"input", "input_splits"?, "output_splits"?}.
absl::StatusOr<Value> AllToAllSingle(Op& op, const Value& input,
                                     const Value& params);
// Without params "axis": the list of every rank's tensor. With it: a nested
// structure of tensors, concatenated leaf by leaf along the axis (tf).
absl::StatusOr<Value> AllGather(Op& op, const Value& input,
                                const Value& params);
// params "op" (default "sum"); a tensor of the same shape on every rank.
absl::StatusOr<Value> AllReduce(Op& op, const Value& input,
                                const Value& params);
// params "op"; input a list of one tensor per rank (or a tensor split
// evenly on dim 0); output the reduction of every rank's block for this rank.
absl::StatusOr<Value> ReduceScatter(Op& op, const Value& input,
                                    const Value& params);

// The jagged all-to-all (kjt_all_to_all.cc). Input: a KJT (kjt.h's Value
// form); params "features_per_rank" (keys per destination, in order) and
// "stagger" (default 1). Output: this rank's keys, batches concatenated.
absl::StatusOr<Value> KjtAllToAll(Op& op, const Value& input,
                                  const Value& params);
// TorchRec's SparseFeaturesAllToAll: input {"id_list": KJT,
// "id_score_list": KJT}, params "id_list_features_per_rank",
// "id_score_list_features_per_rank", "stagger"; both move in one step.
absl::StatusOr<Value> SparseFeaturesAllToAll(Op& op, const Value& input,
                                             const Value& params);

// The algorithm called `name` ("all_reduce"); nullptr if none.
Algorithm Find(absl::string_view name);
// Every name, sorted.
std::vector<std::string> Names();

}  // namespace algorithms
}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_H_
