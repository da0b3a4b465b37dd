#include "rpc/value/tensor_math.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/value/element.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {

absl::Status CheckAlloc(int64_t bytes, const Limits& limits) {
  if (bytes <= limits.max_alloc_bytes) return absl::OkStatus();
  return OverLimit(absl::StrCat(HumanBytes(bytes), " would be allocated"),
                   HumanBytes(limits.max_alloc_bytes), "max_alloc_mb",
                   limits.max_alloc_bytes / Limits::kMiB);
}

absl::StatusOr<int64_t> BytesOf(int64_t numel, DType dtype) {
  int64_t bytes;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(ItemSize(dtype)),
                             &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        numel, " elements of ", DTypeName(dtype), " overflow int64 bytes"));
  }
  return bytes;
}

namespace {

// Adds the bytes of casting `t` to `dtype` (nothing if it has it) to
// `total`; tensors held in memory cannot overflow this.
void AddCastBytes(const Tensor& t, DType dtype, int64_t* total) {
  if (t.dtype() != dtype) {
    *total += t.numel() * static_cast<int64_t>(ItemSize(dtype));
  }
}

// The tensor of `shape` and `dtype` that `limits` allow, uninitialized,
// when `extra` bytes of temporaries come with it.
absl::StatusOr<TensorBuilder> Allocate(DType dtype, Shape shape,
                                       const Limits& limits,
                                       int64_t extra = 0) {
  FERRY_ASSIGN_OR_RETURN(int64_t numel, CheckShape(shape, dtype, limits));
  FERRY_ASSIGN_OR_RETURN(int64_t bytes, BytesOf(numel, dtype));
  int64_t total;
  if (__builtin_add_overflow(bytes, extra, &total)) total = INT64_MAX;
  FERRY_RETURN_IF_ERROR(CheckAlloc(total, limits));
  return TensorBuilder::Create(dtype, std::move(shape));
}

}  // namespace

Tensor Cast(const Tensor& tensor, DType dtype) {
  if (tensor.dtype() == dtype) return tensor;
  TensorBuilder out = *TensorBuilder::Create(dtype, tensor.shape());
  VisitDType(tensor.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    VisitDType(dtype, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* src = tensor.data_as<From>();
      To* dst = out.data_as<To>();
      for (int64_t i = 0; i < tensor.numel(); ++i) {
        dst[i] = ConvertElement<To>(src[i]);
      }
    });
  });
  return std::move(out).Build();
}

namespace {

template <typename T>
T Apply(BinaryOp op, T a, T b) {
  if constexpr (std::is_same<T, bool>::value) {
    return op == BinaryOp::kMul ? (a && b) : (a || b);  // add = logical or.
  } else if constexpr (std::is_integral<T>::value) {
    switch (op) {
      case BinaryOp::kAdd:
        return WrapAdd(a, b);
      case BinaryOp::kSub:
        return WrapSub(a, b);
      case BinaryOp::kMul:
        return WrapMul(a, b);
      case BinaryOp::kDiv:
        break;  // Integer division never reaches here.
    }
    return T(0);
  } else {
    switch (op) {
      case BinaryOp::kAdd:
        return a + b;
      case BinaryOp::kSub:
        return a - b;
      case BinaryOp::kMul:
        return a * b;
      case BinaryOp::kDiv:
        return a / b;
    }
    return T(0);
  }
}

// Elementwise a ⊕ b, both already of dtype `dtype`; a 0-d side broadcasts.
Tensor Elementwise(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Tensor& shaped = a.rank() == 0 ? b : a;
  TensorBuilder out = *TensorBuilder::Create(a.dtype(), shaped.shape());
  const bool a_scalar = a.rank() == 0, b_scalar = b.rank() == 0;
  VisitDType(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data_as<T>();
    const T* pb = b.data_as<T>();
    T* po = out.data_as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      auto r =
          Apply(op, Widen(pa[a_scalar ? 0 : i]), Widen(pb[b_scalar ? 0 : i]));
      po[i] = static_cast<T>(r);
    }
  });
  return std::move(out).Build();
}

DTypeKind ScalarKind(const Value& v) {
  if (v.is_bool()) return DTypeKind::kBool;
  if (v.is_int()) return DTypeKind::kInteger;
  return DTypeKind::kFloating;
}

Tensor ScalarTensor(const Value& v, DType dtype) {
  if (v.is_bool()) return Cast(Tensor::Scalar<bool>(v.as_bool()), dtype);
  if (v.is_int()) return Cast(Tensor::Scalar<int64_t>(v.as_int()), dtype);
  return Cast(Tensor::Scalar<double>(v.as_double()), dtype);
}

// torch: a scalar widens the tensor only if it is of a higher family, and
// then to that family's default dtype (int64, float32).
DType TensorScalarDType(DType tensor, const Value& scalar) {
  DTypeKind sk = ScalarKind(scalar);
  if (sk <= KindOf(tensor)) return tensor;
  return sk == DTypeKind::kInteger ? DType::kInt64 : DType::kFloat32;
}

// torch: a 0-d tensor, like a scalar, sets the dtype only when it is of a
// higher family than the dimensioned operand.
DType TensorTensorDType(const Tensor& a, const Tensor& b) {
  if ((a.rank() == 0) != (b.rank() == 0)) {
    const Tensor& zero = a.rank() == 0 ? a : b;
    const Tensor& dimensioned = a.rank() == 0 ? b : a;
    if (KindOf(zero.dtype()) <= KindOf(dimensioned.dtype())) {
      return dimensioned.dtype();
    }
  }
  return PromoteTypes(a.dtype(), b.dtype());
}

absl::StatusOr<Value> ScalarArithmetic(BinaryOp op, const Value& a,
                                       const Value& b) {
  auto as_int = [](const Value& v) {
    return v.is_bool() ? int64_t{v.as_bool()} : v.as_int();
  };
  if (!a.is_double() && !b.is_double() && op != BinaryOp::kDiv) {
    return Value(Apply(op, as_int(a), as_int(b)));
  }
  auto as_double = [&](const Value& v) {
    return v.is_double() ? v.as_double() : static_cast<double>(as_int(v));
  };
  return Value(Apply(op, as_double(a), as_double(b)));
}

bool IsScalar(const Value& v) { return v.is_number() || v.is_bool(); }

}  // namespace

absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b,
                                 const Limits& limits) {
  if (IsScalar(a) && IsScalar(b)) return ScalarArithmetic(op, a, b);
  if (!(a.is_tensor() || IsScalar(a)) || !(b.is_tensor() || IsScalar(b))) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported operands ", a.kind_name(), " and ",
                     b.kind_name(), " (expected tensors or numbers)"));
  }
  DType dtype;
  Tensor ta, tb;
  if (a.is_tensor() && b.is_tensor()) {
    ta = a.as_tensor();
    tb = b.as_tensor();
    if (ta.shape() != tb.shape() && ta.rank() != 0 && tb.rank() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", ShapeString(ta.shape()), " and ",
                       ShapeString(tb.shape()), " differ"));
    }
    dtype = TensorTensorDType(ta, tb);
  } else {
    const Tensor& t = a.is_tensor() ? a.as_tensor() : b.as_tensor();
    dtype = TensorScalarDType(t.dtype(), a.is_tensor() ? b : a);
    ta = a.is_tensor() ? a.as_tensor() : ScalarTensor(a, dtype);
    tb = b.is_tensor() ? b.as_tensor() : ScalarTensor(b, dtype);
  }
  if (op == BinaryOp::kDiv && KindOf(dtype) <= DTypeKind::kInteger) {
    dtype = DType::kFloat32;  // True division.
  }
  if (op == BinaryOp::kSub && dtype == DType::kBool) {
    return absl::InvalidArgumentError(
        "subtraction of bool tensors is not supported (use a logical op)");
  }
  // The result and any casts, before any of them is made.
  const Tensor& shaped = ta.rank() == 0 ? tb : ta;
  int64_t total = shaped.numel() * static_cast<int64_t>(ItemSize(dtype));
  AddCastBytes(ta, dtype, &total);
  AddCastBytes(tb, dtype, &total);
  FERRY_RETURN_IF_ERROR(CheckAlloc(total, limits));
  return Value(Elementwise(op, Cast(ta, dtype), Cast(tb, dtype)));
}

Tensor SumAll(const Tensor& tensor) {
  DType dtype = KindOf(tensor.dtype()) <= DTypeKind::kInteger ? DType::kInt64
                                                              : tensor.dtype();
  return VisitDType(tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = tensor.data_as<T>();
    if constexpr (std::is_integral<T>::value) {
      int64_t acc = 0;
      for (int64_t i = 0; i < tensor.numel(); ++i) {
        acc = WrapAdd(acc, static_cast<int64_t>(p[i]));
      }
      return Tensor::Scalar<int64_t>(acc);
    } else if constexpr (IsComplex<T>::value) {
      std::complex<double> acc = 0;
      for (int64_t i = 0; i < tensor.numel(); ++i) {
        acc += std::complex<double>(p[i].real(), p[i].imag());
      }
      return Cast(Tensor::Scalar<std::complex<double>>(acc), dtype);
    } else {
      double acc = 0;
      for (int64_t i = 0; i < tensor.numel(); ++i) {
        acc += static_cast<double>(Widen(p[i]));
      }
      return Cast(Tensor::Scalar<double>(acc), dtype);
    }
  });
}

namespace {

absl::Status CheckConcatShapes(absl::Span<const Tensor> tensors, int64_t axis) {
  const Shape& first = tensors[0].shape();
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Shape& s = tensors[i].shape();
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      ok = static_cast<int64_t>(d) == axis || s[d] == first[d];
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensors[", i, "] has shape ", ShapeString(s),
                       " but tensors[0] has ", ShapeString(first),
                       " (all dimensions except ", axis, " must match)"));
    }
  }
  return absl::OkStatus();
}

// The concatenated shape; INVALID_ARGUMENT if the axis overflows.
absl::StatusOr<Shape> ConcatShape(absl::Span<const Tensor> tensors,
                                  int64_t axis) {
  Shape shape = tensors[0].shape();
  shape[axis] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (__builtin_add_overflow(shape[axis], tensors[i].dim(axis),
                               &shape[axis])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensors[", i, "]: dimension ", axis, " overflows int64"));
    }
  }
  return shape;
}

// Copies each tensor's block per outer row. Only called with bytes to
// copy, so `outer` is at most the result's element count.
void CopyBlocks(const std::vector<Tensor>& cast, int64_t outer, char* dst) {
  std::vector<size_t> block;  // Bytes each tensor contributes per row.
  for (const Tensor& t : cast) block.push_back(t.nbytes() / outer);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < cast.size(); ++i) {
      if (block[i] == 0) continue;
      std::memcpy(dst, cast[i].data() + o * block[i], block[i]);
      dst += block[i];
    }
  }
}

}  // namespace

absl::StatusOr<Tensor> Concat(absl::Span<const Tensor> tensors, int64_t axis,
                              const Limits& limits) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("cannot concatenate an empty list");
  }
  const int64_t rank = tensors[0].rank();
  if (rank == 0) {
    return absl::InvalidArgumentError(
        "cannot concatenate 0-d tensors (give them a dimension first)");
  }
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "axis ", axis, " is out of range for tensors of rank ", rank));
  }
  if (axis < 0) axis += rank;
  FERRY_RETURN_IF_ERROR(CheckConcatShapes(tensors, axis));
  DType dtype = tensors[0].dtype();
  for (const Tensor& t : tensors) dtype = PromoteTypes(dtype, t.dtype());
  FERRY_ASSIGN_OR_RETURN(Shape shape, ConcatShape(tensors, axis));
  int64_t casts = 0;
  for (const Tensor& t : tensors) AddCastBytes(t, dtype, &casts);
  FERRY_ASSIGN_OR_RETURN(TensorBuilder out,
                         Allocate(dtype, shape, limits, casts));
  // Nothing to copy: done, however large the other dimensions (the loop
  // below would walk them all).
  if (out.nbytes() == 0) return std::move(out).Build();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  std::vector<Tensor> cast;
  for (const Tensor& t : tensors) cast.push_back(Cast(t, dtype));
  CopyBlocks(cast, outer, out.data());
  return std::move(out).Build();
}

absl::StatusOr<Tensor> Fill(DType dtype, Shape shape, double value,
                            const Limits& limits) {
  FERRY_ASSIGN_OR_RETURN(TensorBuilder out,
                         Allocate(dtype, std::move(shape), limits));
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = ConvertElement<T>(value);
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = v;
  });
  return std::move(out).Build();
}

absl::StatusOr<Tensor> Arange(double start, double end, double step,
                              DType dtype, const Limits& limits) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) ||
      !std::isfinite(step)) {
    return absl::InvalidArgumentError(
        "arange needs finite bounds and a non-zero step");
  }
  if ((end - start) * step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arange: step ", step, " does not lead from ", start, " to ", end));
  }
  // (end - start) may overflow to infinity: compare before converting.
  const double count = std::ceil((end - start) / step);
  if (!(count <= static_cast<double>(limits.max_tensor_dim))) {
    return absl::InvalidArgumentError(
        absl::StrCat("arange: ", count, " elements is ",
                     LimitNote(absl::StrCat(limits.max_tensor_dim),
                               "max_tensor_dim", limits.max_tensor_dim)));
  }
  FERRY_ASSIGN_OR_RETURN(
      TensorBuilder out,
      Allocate(dtype, {static_cast<int64_t>(count)}, limits));
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      p[i] = ConvertElement<T>(start + static_cast<double>(i) * step);
    }
  });
  return std::move(out).Build();
}

}  // namespace ferry
