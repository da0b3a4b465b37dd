// Reductions of all_reduce and reduce_scatter, over all 12 dtypes.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_REDUCE_H_
#define FERRY_COLLECTIVES_ALGORITHMS_REDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/algorithms/reduce_op.h"
#include "rpc/value/tensor.h"

namespace ferry {

// INVALID_ARGUMENT if `op` does not apply to `dtype`: min/max on complex,
// bitwise ops on floating or complex, avg on bool or integers.
absl::Status CheckReduceOp(ReduceOp op, DType dtype);

// acc[i] = acc[i] ⊕ in[i] for `count` elements of `dtype` (avg adds; see
// FinishAverage). The regions must not overlap.
void ReduceInto(ReduceOp op, DType dtype, char* acc, const char* in,
                int64_t count);
// out[i] = a[i] ⊕ b[i]: as ReduceInto, without first copying `a` to `out`.
// `out` may be `a` or `b` (the same elements); otherwise no two regions
// overlap.
void ReduceTo(ReduceOp op, DType dtype, char* out, const char* a, const char* b,
              int64_t count);

// Divides `count` elements by `n` (the end of an avg).
void FinishAverage(DType dtype, char* acc, int64_t count, int n);
// A new tensor: `sum` divided by `n`.
Tensor Averaged(const Tensor& sum, int n);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_REDUCE_H_
