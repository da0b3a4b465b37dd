#include "rpc/value/tensor.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape,
                                           size_t itemsize) {
  // The extent (zero dims counted as 1) is bounded, not just the element
  // count: code that walks the dims of an empty tensor multiplies them.
  const int64_t limit =
      std::numeric_limits<int64_t>::max() / static_cast<int64_t>(itemsize);
  int64_t extent = 1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", i, "]: negative dimension ", d));
    }
    if (d == 0) {
      has_zero = true;
      continue;
    }
    if (extent > limit / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeString(shape), ": byte size overflows int64"));
    }
    extent *= d;
  }
  return has_zero ? 0 : extent;
}

int64_t ShapeExtent(absl::Span<const int64_t> shape) {
  int64_t extent = 1;
  for (int64_t d : shape) extent *= d == 0 ? 1 : d;
  return extent;
}

namespace {

std::string DimPath(absl::string_view path, size_t i) {
  return path.empty() ? absl::StrCat("shape[", i, "]")
                      : absl::StrCat(path, ".shape[", i, "]");
}

std::string ShapePath(absl::string_view path) {
  return path.empty() ? "shape" : absl::StrCat(path, ".shape");
}

// Rank and per-dimension limits; the extent is known not to overflow.
absl::Status CheckShapeAgainst(absl::Span<const int64_t> shape,
                               const Limits& limits, absl::string_view path) {
  if (static_cast<int64_t>(shape.size()) > limits.max_tensor_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(ShapePath(path), ": rank ", shape.size(), " is ",
                     LimitNote(absl::StrCat(limits.max_tensor_rank),
                               "max_tensor_rank", limits.max_tensor_rank)));
  }
  const int64_t max_dim = limits.max_tensor_dim;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > max_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          DimPath(path, i), ": dimension ", shape[i], " is ",
          LimitNote(absl::StrCat(max_dim), "max_tensor_dim", max_dim)));
    }
  }
  int64_t extent = 1;
  for (int64_t d : shape) {
    if (d == 0) continue;
    if (extent > max_dim / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          ShapePath(path), ": ", ShapeString(shape), " spans more than ",
          max_dim, " elements (zero dimensions counted as 1), ",
          LimitNote(absl::StrCat(max_dim), "max_tensor_dim", max_dim)));
    }
    extent *= d;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> CheckShape(absl::Span<const int64_t> shape, DType dtype,
                                   const Limits& limits,
                                   absl::string_view path) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(DimPath(path, i), ": negative dimension ", shape[i]));
    }
  }
  absl::Status s = CheckShapeAgainst(shape, limits, path);
  if (!s.ok()) return s;
  absl::StatusOr<int64_t> numel = CheckedNumElements(shape, ItemSize(dtype));
  if (!numel.ok() && !path.empty()) return Annotate(numel.status(), path);
  return numel;
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

Tensor::Tensor() : Tensor(DType::kFloat32, {0}, 0, nullptr, 0) {}

Tensor::Tensor(DType dtype, Shape shape, int64_t numel,
               std::shared_ptr<const char> data, size_t nbytes)
    : dtype_(dtype),
      shape_(std::move(shape)),
      numel_(numel),
      data_(std::move(data)),
      nbytes_(nbytes) {}

namespace {

// Reading a byte other than 0/1 as C++ bool is undefined behaviour, so bool
// tensors from the wire are checked once here.
absl::Status CheckBoolBytes(const char* data, size_t nbytes) {
  for (size_t i = 0; i < nbytes; ++i) {
    unsigned char b = static_cast<unsigned char>(data[i]);
    if (b > 1) {
      return absl::InvalidArgumentError(absl::StrCat("data: bool element ", i,
                                                     " has byte value ", b,
                                                     " (expected 0 or 1)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> Tensor::FromShared(DType dtype, Shape shape,
                                          std::shared_ptr<const void> owner,
                                          const char* data, size_t nbytes) {
  absl::StatusOr<int64_t> numel = CheckedNumElements(shape, ItemSize(dtype));
  if (!numel.ok()) return numel.status();
  size_t expected = static_cast<size_t>(*numel) * ItemSize(dtype);
  if (nbytes != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: ", nbytes, " bytes, but ", DTypeName(dtype),
                     " shape ", ShapeString(shape), " needs ", *numel, " x ",
                     ItemSize(dtype), " = ", expected));
  }
  if (dtype == DType::kBool) {
    absl::Status s = CheckBoolBytes(data, nbytes);
    if (!s.ok()) return s;
  }
  return Tensor(dtype, std::move(shape), *numel,
                std::shared_ptr<const char>(std::move(owner), data), nbytes);
}

absl::StatusOr<Tensor> Tensor::FromBytes(DType dtype, Shape shape,
                                         std::string bytes) {
  auto holder = std::make_shared<std::string>(std::move(bytes));
  const char* data = holder->data();
  size_t nbytes = holder->size();
  return FromShared(dtype, std::move(shape), std::move(holder), data, nbytes);
}

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, Shape shape) {
  absl::StatusOr<TensorBuilder> builder =
      TensorBuilder::Create(dtype, std::move(shape));
  if (!builder.ok()) return builder.status();
  if (builder->nbytes() > 0) std::memset(builder->data(), 0, builder->nbytes());
  return std::move(*builder).Build();
}

absl::StatusOr<Tensor> Tensor::Rows(int64_t begin, int64_t end) const {
  if (shape_.empty()) {
    return absl::InvalidArgumentError("cannot take rows of a 0-d tensor");
  }
  if (begin < 0 || end < begin || end > shape_[0]) {
    return absl::OutOfRangeError(
        absl::StrCat("rows [", begin, ", ", end,
                     ") out of range for dim 0 of size ", shape_[0]));
  }
  int64_t row_elems = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  size_t row_bytes = static_cast<size_t>(row_elems) * itemsize();
  Shape shape = shape_;
  shape[0] = end - begin;
  std::shared_ptr<const char> data(data_, data_.get() + begin * row_bytes);
  return Tensor(dtype_, std::move(shape), (end - begin) * row_elems,
                std::move(data), (end - begin) * row_bytes);
}

absl::StatusOr<Tensor> Tensor::Reshape(Shape shape) const {
  absl::StatusOr<int64_t> numel = CheckedNumElements(shape, itemsize());
  if (!numel.ok()) return numel.status();
  if (*numel != numel_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape ", ShapeString(shape_), " (", numel_, " elements) to ",
        ShapeString(shape), " (", *numel, " elements)"));
  }
  return Tensor(dtype_, std::move(shape), numel_, data_, nbytes_);
}

std::string Tensor::DebugString() const {
  return absl::StrCat("tensor(", DTypeName(dtype_), ", ", ShapeString(shape_),
                      ")");
}

bool operator==(const Tensor& a, const Tensor& b) {
  return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.bytes() == b.bytes();
}

absl::StatusOr<TensorBuilder> TensorBuilder::Create(DType dtype, Shape shape) {
  absl::StatusOr<int64_t> numel = CheckedNumElements(shape, ItemSize(dtype));
  if (!numel.ok()) return numel.status();
  return TensorBuilder(dtype, std::move(shape), *numel,
                       static_cast<size_t>(*numel) * ItemSize(dtype));
}

absl::StatusOr<TensorBuilder> TensorBuilder::Over(DType dtype, Shape shape,
                                                  std::shared_ptr<void> owner,
                                                  char* data, size_t nbytes) {
  absl::StatusOr<int64_t> numel = CheckedNumElements(shape, ItemSize(dtype));
  if (!numel.ok()) return numel.status();
  const size_t want = static_cast<size_t>(*numel) * ItemSize(dtype);
  if (nbytes != want || (want > 0 && data == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("output: ", nbytes, " bytes for a ", DTypeName(dtype), " ",
                     ShapeString(shape), " tensor of ", want, " bytes"));
  }
  // Aliasing: the builder's buffer is `data`, its lifetime `owner`'s.
  std::shared_ptr<char> at(std::move(owner), want > 0 ? data : nullptr);
  return TensorBuilder(dtype, std::move(shape), *numel, want, std::move(at));
}

TensorBuilder::TensorBuilder(DType dtype, Shape shape, int64_t numel,
                             size_t nbytes, std::shared_ptr<char> data)
    : dtype_(dtype),
      shape_(std::move(shape)),
      numel_(numel),
      nbytes_(nbytes),
      data_(std::move(data)) {}

TensorBuilder::TensorBuilder(DType dtype, Shape shape, int64_t numel,
                             size_t nbytes)
    : dtype_(dtype),
      shape_(std::move(shape)),
      numel_(numel),
      nbytes_(nbytes),
      // Uninitialized on purpose: the caller overwrites every byte.
      data_(nbytes > 0 ? std::shared_ptr<char>(new char[nbytes],
                                               std::default_delete<char[]>())
                       : nullptr) {}

Tensor TensorBuilder::View(int64_t begin, int64_t end) const {
  const size_t item = ItemSize(dtype_);
  std::shared_ptr<const char> data(data_, data_.get() + begin * item);
  return Tensor(dtype_, {end - begin}, end - begin, std::move(data),
                (end - begin) * item);
}

TensorLanding TensorLanding::Within(TensorBuilder& builder, int64_t begin,
                                    int64_t end) {
  const size_t item = ItemSize(builder.dtype_);
  return TensorLanding{builder.data_, builder.data_.get() + begin * item,
                       static_cast<size_t>(end - begin) * item};
}

Tensor TensorBuilder::Build() && {
  return Tensor(dtype_, std::move(shape_), numel_, std::move(data_), nbytes_);
}

}  // namespace ferry
