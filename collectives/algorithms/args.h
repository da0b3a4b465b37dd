// Reading a collective's input and parameters from Values shaped like
// ferryctl's request JSON (by_name.h), with errors that name the field:
// INVALID_ARGUMENT for this rank's input, "<op>: rank r (…): <what>".
// Only the edge parses; the algorithms take what these return.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_ARGS_H_
#define FERRY_COLLECTIVES_ALGORITHMS_ARGS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/op/op.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// The tensor `v`.
absl::StatusOr<Tensor> TensorArg(const Op& op, const Value& v,
                                 absl::string_view what);
// A list of exactly op.size() tensors (their dtypes are the algorithm's
// to check).
absl::StatusOr<std::vector<Tensor>> TensorListArg(const Op& op, const Value& v,
                                                  absl::string_view what);
// An int parameter; `fallback` if absent.
absl::StatusOr<int64_t> IntParam(const Op& op, const Value& params,
                                 absl::string_view key,
                                 std::optional<int64_t> fallback);
// A group rank parameter (src, dst).
absl::StatusOr<int> RankParam(const Op& op, const Value& params,
                              absl::string_view key);
// The reduce op in params "op" (default "sum"); whether it applies to the
// input's dtype is the algorithm's to check.
absl::StatusOr<ReduceOp> ReduceParam(const Op& op, const Value& params);
// A list (or integer tensor) of op.size() integers; empty if `v` is null
// or empty. Negative entries are the algorithm's to refuse.
absl::StatusOr<std::vector<int64_t>> SplitsArg(const Op& op, const Value& v,
                                               absl::string_view what);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_ARGS_H_
