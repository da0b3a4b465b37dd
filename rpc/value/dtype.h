// Tensor element types, their C++ representations and torch's promotion rules.
#ifndef FERRY_RPC_VALUE_DTYPE_H_
#define FERRY_RPC_VALUE_DTYPE_H_

#include <complex>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/value/half.h"

namespace ferry {

// Numbering matches proto/value.proto's DType.
enum class DType : int {
  kBool = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kInt16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kFloat16 = 7,
  kBFloat16 = 8,
  kFloat32 = 9,
  kFloat64 = 10,
  kComplex64 = 11,
  kComplex128 = 12,
};

inline constexpr DType kAllDTypes[] = {
    DType::kBool,    DType::kUInt8,   DType::kInt8,      DType::kInt16,
    DType::kInt32,   DType::kInt64,   DType::kFloat16,   DType::kBFloat16,
    DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kComplex128};

// The four families that decide promotion and which operations apply.
enum class DTypeKind { kBool, kInteger, kFloating, kComplex };

// True if `wire` is one of the 12 dtype numbers.
bool IsValidDType(int wire);

// "float32", "complex64", …: the names used in JSON and messages.
absl::string_view DTypeName(DType dtype);

// Accepts the canonical names and torch's aliases ("float", "double",
// "half", "int", "long", "short", "cfloat", "cdouble").
// INVALID_ARGUMENT names the unknown string.
absl::StatusOr<DType> ParseDType(absl::string_view name);

size_t ItemSize(DType dtype);
DTypeKind KindOf(DType dtype);

// torch.promote_types: the dtype of a binary operation on two tensors.
DType PromoteTypes(DType a, DType b);

// C++ element type of each dtype.
template <DType D>
struct DTypeTraits;
#define FERRY_DTYPE_TRAITS_(D, T) \
  template <>                     \
  struct DTypeTraits<DType::D> {  \
    using type = T;               \
  }
FERRY_DTYPE_TRAITS_(kBool, bool);
FERRY_DTYPE_TRAITS_(kUInt8, uint8_t);
FERRY_DTYPE_TRAITS_(kInt8, int8_t);
FERRY_DTYPE_TRAITS_(kInt16, int16_t);
FERRY_DTYPE_TRAITS_(kInt32, int32_t);
FERRY_DTYPE_TRAITS_(kInt64, int64_t);
FERRY_DTYPE_TRAITS_(kFloat16, Float16);
FERRY_DTYPE_TRAITS_(kBFloat16, BFloat16);
FERRY_DTYPE_TRAITS_(kFloat32, float);
FERRY_DTYPE_TRAITS_(kFloat64, double);
FERRY_DTYPE_TRAITS_(kComplex64, std::complex<float>);
FERRY_DTYPE_TRAITS_(kComplex128, std::complex<double>);
#undef FERRY_DTYPE_TRAITS_

// The dtype of a C++ element type: DTypeOf<float>() == DType::kFloat32.
template <typename T>
constexpr DType DTypeOf();
#define FERRY_DTYPE_OF_(D, T)    \
  template <>                    \
  constexpr DType DTypeOf<T>() { \
    return DType::D;             \
  }
FERRY_DTYPE_OF_(kBool, bool)
FERRY_DTYPE_OF_(kUInt8, uint8_t)
FERRY_DTYPE_OF_(kInt8, int8_t)
FERRY_DTYPE_OF_(kInt16, int16_t)
FERRY_DTYPE_OF_(kInt32, int32_t)
FERRY_DTYPE_OF_(kInt64, int64_t)
FERRY_DTYPE_OF_(kFloat16, Float16)
FERRY_DTYPE_OF_(kBFloat16, BFloat16)
FERRY_DTYPE_OF_(kFloat32, float)
FERRY_DTYPE_OF_(kFloat64, double)
FERRY_DTYPE_OF_(kComplex64, std::complex<float>)
FERRY_DTYPE_OF_(kComplex128, std::complex<double>)
#undef FERRY_DTYPE_OF_

// Calls `f(std::type_identity<T>{})` with T the element type of `dtype`:
//
//   VisitDType(t.dtype(), [&](auto tag) {
//     using T = typename decltype(tag)::type;
//     …
//   });
template <typename F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBool:
      return f(std::type_identity<bool>{});
    case DType::kUInt8:
      return f(std::type_identity<uint8_t>{});
    case DType::kInt8:
      return f(std::type_identity<int8_t>{});
    case DType::kInt16:
      return f(std::type_identity<int16_t>{});
    case DType::kInt32:
      return f(std::type_identity<int32_t>{});
    case DType::kInt64:
      return f(std::type_identity<int64_t>{});
    case DType::kFloat16:
      return f(std::type_identity<Float16>{});
    case DType::kBFloat16:
      return f(std::type_identity<BFloat16>{});
    case DType::kFloat32:
      return f(std::type_identity<float>{});
    case DType::kFloat64:
      return f(std::type_identity<double>{});
    case DType::kComplex64:
      return f(std::type_identity<std::complex<float>>{});
    case DType::kComplex128:
      break;
  }
  return f(std::type_identity<std::complex<double>>{});
}

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_DTYPE_H_
