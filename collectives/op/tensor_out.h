// Where a collective writes a result tensor: caller memory (torch's output
// arguments), so what arrives is received there instead of into a buffer
// of ferry's. Null: a new buffer.
//
//   absl::StatusOr<TensorOut> out =
//       OutputOver(DType::kFloat32, {4}, keep_alive, data, 16);
//   Work<Tensor> w = AllReduceIntoAsync(group, grad, *out);
//
// (The builder inside is the library's: rpc/value/tensor_builder.h.)
#ifndef FERRY_COLLECTIVES_OP_TENSOR_OUT_H_
#define FERRY_COLLECTIVES_OP_TENSOR_OUT_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "rpc/value/dtype.h"
#include "rpc/value/tensor.h"

namespace ferry {

using TensorOut = std::shared_ptr<TensorBuilder>;

// An output over `nbytes` of caller memory at `data`, kept alive by
// `owner` until the op is done and its result tensor is gone (the result
// shares that memory). INVALID_ARGUMENT for an invalid shape or if
// `nbytes` is not its size.
absl::StatusOr<TensorOut> OutputOver(DType dtype, Shape shape,
                                     std::shared_ptr<void> owner, char* data,
                                     size_t nbytes);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_TENSOR_OUT_H_
