// Elementwise arithmetic and tensor utilities behind the built-in functions
// (and reused by collectives): casts, + - * / with torch's type promotion,
// sum, concatenation along an axis, fills and ranges.
#ifndef FERRY_RPC_VALUE_TENSOR_MATH_H_
#define FERRY_RPC_VALUE_TENSOR_MATH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// Converts every element (complex → real keeps the real part; float → int
// truncates and saturates, NaN → 0; anything → bool is "non-zero").
Tensor Cast(const Tensor& tensor, DType dtype);

// a ⊕ b for tensors of the same shape (or a 0-d operand), a tensor and a
// scalar (int, double, bool), or two scalars. Result dtypes follow torch: a
// scalar only widens a tensor of a lower family (int tensor + 2.5 → float32),
// division of integers gives float32 (scalars: double). INVALID_ARGUMENT for
// other operand kinds or mismatched shapes.
absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b);

// Sum of all elements as a 0-d tensor: bool and integers → int64, others
// keep their dtype.
Tensor SumAll(const Tensor& tensor);

// Concatenation along `axis` (negative counts from the end). All tensors
// have the same rank ≥ 1 and equal dimensions except `axis`; dtypes are
// promoted. INVALID_ARGUMENT names the offending tensor.
absl::StatusOr<Tensor> Concat(absl::Span<const Tensor> tensors, int64_t axis);

// A tensor of `shape` with every element `value`.
absl::StatusOr<Tensor> Fill(DType dtype, Shape shape, double value);

// [start, end) in steps of `step` (torch.arange). INVALID_ARGUMENT for a
// zero step or a step pointing away from `end`.
absl::StatusOr<Tensor> Arange(double start, double end, double step,
                              DType dtype);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_TENSOR_MATH_H_
