// Deterministic sample tensors for every dtype, for round-trip and
// collective tests.
#ifndef FERRY_TESTS_TESTING_TENSOR_SAMPLES_H_
#define FERRY_TESTS_TESTING_TENSOR_SAMPLES_H_

#include <cstdint>
#include <utility>

#include "rpc/value/tensor.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {
namespace testing {

// Element k of a sample is derived from `seed + k`; values are exact in
// every dtype (small integers, halves and quarters), complex ones have a
// non-zero imaginary part, bool alternates.
inline Tensor SampleTensor(DType dtype, Shape shape, int64_t seed = 0) {
  TensorBuilder b = *TensorBuilder::Create(dtype, std::move(shape));
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = b.template data_as<T>();
    for (int64_t k = 0; k < b.numel(); ++k) {
      int64_t v = seed + k;
      if constexpr (std::is_same<T, bool>::value) {
        out[k] = v % 2 == 1;
      } else if constexpr (std::is_integral<T>::value) {
        out[k] = static_cast<T>(v % 100);
      } else if constexpr (std::is_same<T, Float16>::value ||
                           std::is_same<T, BFloat16>::value) {
        out[k] = T(static_cast<float>(v % 64) * 0.25f - 3.0f);
      } else if constexpr (std::is_floating_point<T>::value) {
        out[k] = static_cast<T>(v) * 0.5 - 3.25;
      } else {
        using R = typename T::value_type;
        out[k] = T(static_cast<R>(v), static_cast<R>(-v) * 0.5f);
      }
    }
  });
  return std::move(b).Build();
}

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_TENSOR_SAMPLES_H_
