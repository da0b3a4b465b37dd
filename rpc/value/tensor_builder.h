// TensorBuilder: a new tensor's bytes, written once and then frozen into
// a Tensor. The library's (collectives' results, received tensors, the
// language bindings), not a user's: ferry.h shows only the factories of
// Tensor and, for results written into caller memory, OutputOver
// (collectives/op/tensor_out.h).
#ifndef FERRY_RPC_VALUE_TENSOR_BUILDER_H_
#define FERRY_RPC_VALUE_TENSOR_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "rpc/value/dtype.h"
#include "rpc/value/tensor.h"

namespace ferry {

// Allocates an uninitialized buffer for a tensor, lets the caller fill it,
// and hands it over as an immutable Tensor.
//
//   FERRY_ASSIGN_OR_RETURN(TensorBuilder b, TensorBuilder::Create(dtype,
//   shape)); std::memcpy(b.data(), src, b.nbytes()); Tensor t =
//   std::move(b).Build();
class TensorBuilder {
 public:
  // INVALID_ARGUMENT for an invalid shape.
  static absl::StatusOr<TensorBuilder> Create(DType dtype, Shape shape);
  // A builder over caller memory instead of a new buffer: `nbytes` at
  // `data`, kept alive by `owner` (a collective's output argument, so its
  // result is written where the caller wants it). The Tensor it builds
  // shares that memory. INVALID_ARGUMENT for an invalid shape or if
  // `nbytes` is not its size.
  static absl::StatusOr<TensorBuilder> Over(DType dtype, Shape shape,
                                            std::shared_ptr<void> owner,
                                            char* data, size_t nbytes);

  TensorBuilder(TensorBuilder&&) = default;
  TensorBuilder& operator=(TensorBuilder&&) = default;

  char* data() { return data_.get(); }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(data_.get());
  }
  size_t nbytes() const { return nbytes_; }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }

  // The finished tensor; the builder is left empty.
  Tensor Build() &&;

  // A 1-D view of elements [begin, end) of the buffer being built, sharing
  // it. For senders that stream finished regions while others are still
  // written: the caller must not write the viewed region while the view is
  // in use.
  Tensor View(int64_t begin, int64_t end) const;

 private:
  friend struct TensorLanding;  // Its Within: receiving into the buffer.
  TensorBuilder(DType dtype, Shape shape, int64_t numel, size_t nbytes);
  TensorBuilder(DType dtype, Shape shape, int64_t numel, size_t nbytes,
                std::shared_ptr<char> data);

  DType dtype_;
  Shape shape_;
  int64_t numel_;
  size_t nbytes_;
  std::shared_ptr<char> data_;
};

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_TENSOR_BUILDER_H_
