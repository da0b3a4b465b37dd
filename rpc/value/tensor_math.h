// Elementwise arithmetic and tensor utilities behind the built-in functions
// (and reused by collectives): casts, + - * / with torch's type promotion,
// sum, concatenation along an axis, fills and ranges.
#ifndef FERRY_RPC_VALUE_TENSOR_MATH_H_
#define FERRY_RPC_VALUE_TENSOR_MATH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rpc/base/limits.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// What an operation may allocate. Every function below that takes
// `limits` computes the size of its result and temporaries with checked
// arithmetic before allocating anything, and refuses
//   a shape over --max_tensor_rank/--max_tensor_dim     INVALID_ARGUMENT
//   more than --max_alloc_mb bytes in all               RESOURCE_EXHAUSTED
// naming the flag ("zeros: 64 GiB would be allocated, over the limit of
// 2 GiB (--max_alloc_mb=2048)"). Builtins pass the call's limits
// (CallContext::limits); other callers may rely on the defaults.

// RESOURCE_EXHAUSTED if `bytes` is over limits.max_alloc_bytes.
absl::Status CheckAlloc(int64_t bytes, const Limits& limits);

// numel x itemsize(dtype), or INVALID_ARGUMENT if that overflows int64.
absl::StatusOr<int64_t> BytesOf(int64_t numel, DType dtype);

// Converts every element (complex → real keeps the real part; float → int
// truncates and saturates, NaN → 0; anything → bool is "non-zero"). For
// tensors already held (the result is at most 16x their size).
Tensor Cast(const Tensor& tensor, DType dtype);

// a ⊕ b for tensors of the same shape (or a 0-d operand), a tensor and a
// scalar (int, double, bool), or two scalars. Result dtypes follow torch: a
// scalar only widens a tensor of a lower family (int tensor + 2.5 → float32),
// division of integers gives float32 (scalars: double). INVALID_ARGUMENT for
// other operand kinds or mismatched shapes.
absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b,
                                 const Limits& limits = DefaultLimits());

// Sum of all elements as a 0-d tensor: bool and integers → int64, others
// keep their dtype.
Tensor SumAll(const Tensor& tensor);

// Concatenation along `axis` (negative counts from the end). All tensors
// have the same rank ≥ 1 and equal dimensions except `axis`; dtypes are
// promoted. INVALID_ARGUMENT names the offending tensor. An empty result
// is answered at once, whatever its other dimensions.
absl::StatusOr<Tensor> Concat(absl::Span<const Tensor> tensors, int64_t axis,
                              const Limits& limits = DefaultLimits());

// A tensor of `shape` with every element `value`.
absl::StatusOr<Tensor> Fill(DType dtype, Shape shape, double value,
                            const Limits& limits = DefaultLimits());

// [start, end) in steps of `step` (torch.arange). INVALID_ARGUMENT for a
// zero step or a step pointing away from `end`.
absl::StatusOr<Tensor> Arange(double start, double end, double step,
                              DType dtype,
                              const Limits& limits = DefaultLimits());

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_TENSOR_MATH_H_
