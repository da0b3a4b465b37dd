// Where a collective writes a result tensor: caller memory (torch's output
// arguments) wrapped by TensorBuilder::Over, so what arrives is received
// there instead of into a buffer of ferry's. Null: a new buffer.
#ifndef FERRY_COLLECTIVES_TENSOR_OUT_H_
#define FERRY_COLLECTIVES_TENSOR_OUT_H_

#include <memory>

#include "rpc/value/tensor.h"

namespace ferry {

using TensorOut = std::shared_ptr<TensorBuilder>;

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TENSOR_OUT_H_
