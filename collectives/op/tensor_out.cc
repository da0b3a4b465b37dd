#include "collectives/op/tensor_out.h"

#include <memory>
#include <utility>

#include "rpc/value/tensor_builder.h"

namespace ferry {

absl::StatusOr<TensorOut> OutputOver(DType dtype, Shape shape,
                                     std::shared_ptr<void> owner, char* data,
                                     size_t nbytes) {
  absl::StatusOr<TensorBuilder> builder = TensorBuilder::Over(
      dtype, std::move(shape), std::move(owner), data, nbytes);
  if (!builder.ok()) return builder.status();
  return std::make_shared<TensorBuilder>(std::move(*builder));
}

}  // namespace ferry
