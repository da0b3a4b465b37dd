// How a reduction combines its members' elements (all_reduce, reduce,
// reduce_scatter), and its names on the wire, in ferryctl and in Python.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_REDUCE_OP_H_
#define FERRY_COLLECTIVES_ALGORITHMS_REDUCE_OP_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg, kBand, kBor, kBxor };

// "sum", "prod", "min", "max", "avg", "band", "bor", "bxor".
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);
absl::string_view ReduceOpName(ReduceOp op);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_REDUCE_OP_H_
