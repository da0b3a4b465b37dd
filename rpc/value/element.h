// Element-level conversions shared by tensor math and reductions.
#ifndef FERRY_RPC_VALUE_ELEMENT_H_
#define FERRY_RPC_VALUE_ELEMENT_H_

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "rpc/value/half.h"

namespace ferry {

template <typename T>
struct IsComplex : std::false_type {};
template <typename R>
struct IsComplex<std::complex<R>> : std::true_type {};

template <typename T>
constexpr bool kIsHalf =
    std::is_same<T, Float16>::value || std::is_same<T, BFloat16>::value;

// The type arithmetic on T is carried out in: 16-bit floats compute in
// float, everything else in itself.
template <typename T>
using Compute = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T>
Compute<T> Widen(T v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// Converts one element between any two of the 12 element types.
template <typename To, typename From>
To ConvertElement(From in) {
  auto v = Widen(in);
  using V = decltype(v);
  if constexpr (IsComplex<To>::value) {
    using R = typename To::value_type;
    if constexpr (IsComplex<V>::value) {
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else {
      return To(static_cast<R>(v), 0);
    }
  } else if constexpr (std::is_same<To, bool>::value) {
    return v != V(0);
  } else {
    auto r = [&] {
      if constexpr (IsComplex<V>::value) {
        return v.real();
      } else {
        return v;
      }
    }();
    using Rv = decltype(r);
    if constexpr (kIsHalf<To>) {
      return To(static_cast<float>(r));
    } else if constexpr (std::is_integral<To>::value &&
                         std::is_floating_point<Rv>::value) {
      // Saturate: converting an out-of-range float to an integer is UB.
      if (std::isnan(r)) return To(0);
      if (r <= static_cast<Rv>(std::numeric_limits<To>::min())) {
        return std::numeric_limits<To>::min();
      }
      if (r >= static_cast<Rv>(std::numeric_limits<To>::max())) {
        return std::numeric_limits<To>::max();
      }
      return static_cast<To>(r);
    } else {
      return static_cast<To>(r);
    }
  }
}

// Wrapping integer arithmetic (signed overflow is UB in C++).
template <typename T>
T WrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
T WrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
T WrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // Promote to at least unsigned int so small types do not go through int.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<T>(static_cast<W>(static_cast<U>(a)) *
                        static_cast<W>(static_cast<U>(b)));
}

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_ELEMENT_H_
