// Tensor: a dtype, a shape and contiguous row-major little-endian bytes in a
// shared immutable buffer. Copying a Tensor copies a pointer, never bytes;
// views (Rows, Reshape) share the buffer too.
//
//   Tensor t = Tensor::FromVector<float>({1, 2, 3, 4});
//   absl::StatusOr<Tensor> m = t.Reshape({2, 2});
//
// Internally a new tensor is filled through a TensorBuilder
// (rpc/value/tensor_builder.h: uninitialized bytes, written once, then
// frozen into a Tensor); users make tensors with the factories below.
#ifndef FERRY_RPC_VALUE_TENSOR_H_
#define FERRY_RPC_VALUE_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rpc/base/limits.h"
#include "rpc/value/dtype.h"

namespace ferry {

class TensorBuilder;  // rpc/value/tensor_builder.h; not a user's.

using Shape = std::vector<int64_t>;

// ---- Shape rules ----
//
// Every Tensor, however it is made, has dims >= 0 and an *extent* (the
// product of its non-zero dims: its element count with zero dims counted
// as 1) whose byte size, extent x itemsize, fits int64. So no product of
// any of its dims, and no byte offset into it, overflows.
//
// A shape that a peer or a caller chose (decoders, builtins, KJTs) must
// also keep within Limits, checked by CheckShape:
//   rank <= max_tensor_rank (--max_tensor_rank), and
//   extent <= max_tensor_dim (--max_tensor_dim), so every dim is bounded
//   even when another one is 0: [2^62, 0] is refused, [2^20, 0] is not.
// Over either: INVALID_ARGUMENT naming the dimension and the flag.
//
// An empty tensor may still have an extent up to max_tensor_dim (2^40 by
// default), so code never loops over the dims of a tensor that has no
// bytes: loops are bounded by the bytes or elements they produce (Concat
// answers an empty result at once; printing stops after a few elements).
// Validation is O(rank), never O(numel).

// Number of elements of `shape`. INVALID_ARGUMENT (naming shape[i]) for a
// negative dimension, or if the extent x itemsize would overflow int64.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape,
                                           size_t itemsize);

// The extent of a valid shape: the product of its non-zero dims.
int64_t ShapeExtent(absl::Span<const int64_t> shape);

// CheckedNumElements plus the Limits above. Errors name `path` and the
// dimension: "args[1].shape[0]: dimension 4611686018427387904 is over the
// limit of 1099511627776 (--max_tensor_dim=1099511627776)". An empty `path`
// gives "shape[0]: …".
absl::StatusOr<int64_t> CheckShape(absl::Span<const int64_t> shape, DType dtype,
                                   const Limits& limits,
                                   absl::string_view path = "");

// "[2, 3]".
std::string ShapeString(absl::Span<const int64_t> shape);

class Tensor {
 public:
  // An empty 1-D float32 tensor (shape [0]).
  Tensor();

  // Takes ownership of `bytes` without copying. Validates the shape, that
  // bytes.size() == numel * itemsize and, for bool, that every byte is 0/1.
  static absl::StatusOr<Tensor> FromBytes(DType dtype, Shape shape,
                                          std::string bytes);

  // Wraps `nbytes` at `data`, kept alive by `owner`; validated as FromBytes.
  static absl::StatusOr<Tensor> FromShared(DType dtype, Shape shape,
                                           std::shared_ptr<const void> owner,
                                           const char* data, size_t nbytes);

  // A 1-D tensor holding `values`.
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values);

  // A tensor of `shape` holding `values` (row-major); INVALID_ARGUMENT if
  // the counts differ.
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(const std::vector<T>& values,
                                           Shape shape);

  // A 0-d tensor.
  template <typename T>
  static Tensor Scalar(T value);

  static absl::StatusOr<Tensor> Zeros(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  size_t itemsize() const { return ItemSize(dtype_); }

  const char* data() const { return data_.get(); }
  absl::string_view bytes() const { return {data_.get(), nbytes_}; }

  // Typed element access; T must match dtype() (checked in debug builds).
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data_.get());
  }
  template <typename T>
  std::vector<T> ToVector() const;

  // The sub-tensor of rows [begin, end) along dimension 0, sharing bytes.
  // OUT_OF_RANGE if the range is not within dim 0; INVALID_ARGUMENT for
  // a 0-d tensor.
  absl::StatusOr<Tensor> Rows(int64_t begin, int64_t end) const;

  // The same bytes viewed with another shape of equal numel.
  absl::StatusOr<Tensor> Reshape(Shape shape) const;

  // The buffer's keep-alive handle (for zero-copy hand-off to transports).
  const std::shared_ptr<const char>& buffer() const { return data_; }

  // "tensor(int64, [2, 3])".
  std::string DebugString() const;

  // Same dtype, shape and bytes.
  friend bool operator==(const Tensor& a, const Tensor& b);
  friend bool operator!=(const Tensor& a, const Tensor& b) { return !(a == b); }

 private:
  friend class TensorBuilder;
  Tensor(DType dtype, Shape shape, int64_t numel,
         std::shared_ptr<const char> data, size_t nbytes);

  DType dtype_;
  Shape shape_;
  int64_t numel_;
  std::shared_ptr<const char> data_;
  size_t nbytes_;
};

// ---- Implementation of templates ----

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values) {
  return *FromVector(values, {static_cast<int64_t>(values.size())});
}

template <typename T>
absl::StatusOr<Tensor> Tensor::FromVector(const std::vector<T>& values,
                                          Shape shape) {
  // Element by element: std::vector<bool> has no contiguous bytes.
  std::string bytes(values.size() * sizeof(T), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const T v = values[i];
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  return FromBytes(DTypeOf<T>(), std::move(shape), std::move(bytes));
}

template <typename T>
Tensor Tensor::Scalar(T value) {
  return *FromVector(std::vector<T>{value}, {});
}

template <typename T>
std::vector<T> Tensor::ToVector() const {
  const T* p = data_as<T>();
  return std::vector<T>(p, p + numel_);
}

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_TENSOR_H_
