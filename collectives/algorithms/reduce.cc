#include "collectives/algorithms/reduce.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "rpc/value/element.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {

namespace {

template <typename T>
T Combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_same<T, bool>::value) {
    switch (op) {
      case ReduceOp::kProd:
      case ReduceOp::kMin:
      case ReduceOp::kBand:
        return a && b;
      case ReduceOp::kBxor:
        return a != b;
      default:
        return a || b;  // sum, max, bor
    }
  } else if constexpr (std::is_integral<T>::value) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return WrapAdd(a, b);
      case ReduceOp::kProd:
        return WrapMul(a, b);
      case ReduceOp::kMin:
        return std::min(a, b);
      case ReduceOp::kMax:
        return std::max(a, b);
      case ReduceOp::kBand:
        return a & b;
      case ReduceOp::kBor:
        return a | b;
      case ReduceOp::kBxor:
        return a ^ b;
    }
    return a;
  } else if constexpr (IsComplex<T>::value) {
    return op == ReduceOp::kProd ? a * b
                                 : a + b;  // Only sum/prod/avg reach here.
  } else {
    switch (op) {
      case ReduceOp::kProd:
        return a * b;
      case ReduceOp::kMin:
        return std::min(a, b);
      case ReduceOp::kMax:
        return std::max(a, b);
      default:
        return a + b;  // sum, avg
    }
  }
}

}  // namespace

absl::Status CheckReduceOp(ReduceOp op, DType dtype) {
  const DTypeKind kind = KindOf(dtype);
  const bool bitwise =
      op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("op ", ReduceOpName(op), " does not apply to ",
                     DTypeName(dtype), ": ", why));
  };
  if (kind == DTypeKind::kComplex &&
      (op == ReduceOp::kMin || op == ReduceOp::kMax)) {
    return refuse("complex numbers are not ordered");
  }
  if (bitwise && kind >= DTypeKind::kFloating)
    return refuse("bitwise ops need integers");
  if (op == ReduceOp::kAvg && kind <= DTypeKind::kInteger) {
    return refuse("avg needs a floating or complex dtype (use sum)");
  }
  return absl::OkStatus();
}

namespace {

// GCC's -O2 vectorizes only loops that need no runtime check, and these
// need one (out may be a). Its dynamic cost model vectorizes them: each
// element is still a[i] ⊕ b[i], the same bits, 4-8 at a time (a 64 KiB
// float32 sum took 6 instructions an element, callgrind: BENCHMARKS.md).
#if defined(__GNUC__) && !defined(__clang__)
#define FERRY_VECTORIZED __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define FERRY_VECTORIZED
#endif

// out[i] = a[i] ⊕ b[i] with the op fixed at compile time, so the loop has
// no branch and vectorizes where the dtype allows.
template <ReduceOp kOp, typename T>
FERRY_VECTORIZED void Apply(T* out, const T* a, const T* b, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<T>(Combine(kOp, Widen(a[i]), Widen(b[i])));
  }
}

template <typename T>
void ApplyOp(ReduceOp op, T* out, const T* a, const T* b, int64_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return Apply<ReduceOp::kSum>(out, a, b, count);
    case ReduceOp::kProd:
      return Apply<ReduceOp::kProd>(out, a, b, count);
    case ReduceOp::kMin:
      return Apply<ReduceOp::kMin>(out, a, b, count);
    case ReduceOp::kMax:
      return Apply<ReduceOp::kMax>(out, a, b, count);
    case ReduceOp::kBand:
      return Apply<ReduceOp::kBand>(out, a, b, count);
    case ReduceOp::kBor:
      return Apply<ReduceOp::kBor>(out, a, b, count);
    case ReduceOp::kBxor:
      return Apply<ReduceOp::kBxor>(out, a, b, count);
  }
}

}  // namespace

void ReduceInto(ReduceOp op, DType dtype, char* acc, const char* in,
                int64_t count) {
  ReduceTo(op, dtype, acc, acc, in, count);
}

void ReduceTo(ReduceOp op, DType dtype, char* out, const char* a, const char* b,
              int64_t count) {
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ApplyOp(op, reinterpret_cast<T*>(out), reinterpret_cast<const T*>(a),
            reinterpret_cast<const T*>(b), count);
  });
}

void FinishAverage(DType dtype, char* acc, int64_t count, int n) {
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* a = reinterpret_cast<T*>(acc);
    if constexpr (IsComplex<T>::value) {
      using R = typename T::value_type;
      for (int64_t i = 0; i < count; ++i) a[i] /= static_cast<R>(n);
    } else if constexpr (std::is_floating_point<Compute<T>>::value) {
      for (int64_t i = 0; i < count; ++i) {
        a[i] = static_cast<T>(Widen(a[i]) / static_cast<Compute<T>>(n));
      }
    }
  });
}

Tensor Averaged(const Tensor& sum, int n) {
  TensorBuilder out =
      *TensorBuilder::Create(sum.dtype(), sum.shape());  // A valid shape.
  if (sum.nbytes() > 0) std::memcpy(out.data(), sum.data(), sum.nbytes());
  FinishAverage(sum.dtype(), out.data(), sum.numel(), n);
  return std::move(out).Build();
}

}  // namespace ferry
