#include "rpc/value/dtype.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ferry {

bool IsValidDType(int wire) {
  return wire >= static_cast<int>(DType::kBool) &&
         wire <= static_cast<int>(DType::kComplex128);
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
  }
  return "invalid";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  struct Alias {
    absl::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"half", DType::kFloat16},     {"float", DType::kFloat32},
      {"double", DType::kFloat64},   {"short", DType::kInt16},
      {"int", DType::kInt32},        {"long", DType::kInt64},
      {"cfloat", DType::kComplex64}, {"cdouble", DType::kComplex128},
  };
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name,
                   "' (expected bool, uint8, int8, int16, int32, int64, "
                   "float16, bfloat16, float32, float64, complex64 or "
                   "complex128)"));
}

size_t ItemSize(DType dtype) {
  return VisitDType(
      dtype, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

DTypeKind KindOf(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return DTypeKind::kBool;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return DTypeKind::kFloating;
    case DType::kComplex64:
    case DType::kComplex128:
      return DTypeKind::kComplex;
    default:
      return DTypeKind::kInteger;
  }
}

namespace {

// Smallest signed integer type holding both an unsigned 8-bit and `other`.
DType PromoteIntegers(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kUInt8 || b == DType::kUInt8) {
    DType other = a == DType::kUInt8 ? b : a;
    return other == DType::kInt8 ? DType::kInt16 : other;
  }
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

DType PromoteFloats(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::kFloat16 && b == DType::kBFloat16) ||
      (a == DType::kBFloat16 && b == DType::kFloat16)) {
    return DType::kFloat32;
  }
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

}  // namespace

DType PromoteTypes(DType a, DType b) {
  DTypeKind ka = KindOf(a), kb = KindOf(b);
  if (ka != kb) {
    // The wider family wins; complex absorbs float64's precision.
    if (ka < kb) return PromoteTypes(b, a);
    if (ka == DTypeKind::kComplex && b == DType::kFloat64) {
      return DType::kComplex128;
    }
    return a;
  }
  switch (ka) {
    case DTypeKind::kBool:
      return DType::kBool;
    case DTypeKind::kInteger:
      return PromoteIntegers(a, b);
    case DTypeKind::kFloating:
      return PromoteFloats(a, b);
    case DTypeKind::kComplex:
      break;
  }
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

}  // namespace ferry
