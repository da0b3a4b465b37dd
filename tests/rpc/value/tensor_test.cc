#include "rpc/value/tensor.h"

#include <complex>
#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "rpc/base/limits.h"
#include "rpc/value/tensor_builder.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TensorTest, DefaultIsEmptyFloat32) {
  Tensor t;
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.shape(), Shape({0}));
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
}

TEST(TensorTest, FromVectorAndBack) {
  Tensor t = Tensor::FromVector<int64_t>({1, 2, 3});
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_EQ(t.shape(), Shape({3}));
  EXPECT_EQ(t.ToVector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  ASSERT_OK_AND_ASSIGN(Tensor m,
                       Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(m.rank(), 2);
  EXPECT_EQ(m.numel(), 6);
  EXPECT_EQ(m.nbytes(), 24u);
}

TEST(TensorTest, FromVectorCountMismatch) {
  EXPECT_THAT(Tensor::FromVector<float>({1, 2, 3}, {2, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorTest, ScalarIsZeroDimensional) {
  Tensor s = Tensor::Scalar<double>(2.5);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.ToVector<double>(), std::vector<double>{2.5});
}

TEST(TensorTest, FromBytesChecksLength) {
  EXPECT_THAT(Tensor::FromBytes(DType::kFloat32, {2, 2}, std::string(15, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("15 bytes, but float32 shape [2, 2] needs 4 x "
                                 "4 = 16")));
  ASSERT_OK_AND_ASSIGN(
      Tensor t, Tensor::FromBytes(DType::kInt16, {2, 0, 3}, std::string()));
  EXPECT_EQ(t.numel(), 0);
}

TEST(TensorTest, NegativeDimensionNamed) {
  EXPECT_THAT(Tensor::FromBytes(DType::kInt8, {2, -1}, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shape[1]: negative dimension -1")));
}

TEST(TensorTest, NumelOverflowDetected) {
  int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THAT(Tensor::FromBytes(DType::kInt8, {big, 3}, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("overflows int64")));
  // numel fits but numel * itemsize does not.
  EXPECT_THAT(TensorBuilder::Create(DType::kComplex128, {big / 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("overflows int64")));
  // A zero dimension does not make the others harmless: their product
  // (the extent) must fit too, since code multiplies the dims.
  EXPECT_THAT(Tensor::FromBytes(DType::kInt8, {big, 0, big}, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("overflows int64")));
  EXPECT_OK(Tensor::FromBytes(DType::kInt8, {big, 0}, ""));
}

TEST(TensorTest, BoolBytesMustBeZeroOrOne) {
  EXPECT_OK(
      Tensor::FromBytes(DType::kBool, {3}, std::string("\x00\x01\x00", 3)));
  EXPECT_THAT(Tensor::FromBytes(DType::kBool, {2}, std::string("\x01\x07", 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bool element 1 has byte value 7")));
}

TEST(TensorTest, RowsShareBytes) {
  ASSERT_OK_AND_ASSIGN(Tensor m,
                       Tensor::FromVector<int32_t>({0, 1, 2, 3, 4, 5}, {3, 2}));
  ASSERT_OK_AND_ASSIGN(Tensor r, m.Rows(1, 3));
  EXPECT_EQ(r.shape(), Shape({2, 2}));
  EXPECT_EQ(r.ToVector<int32_t>(), (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(r.data(), m.data() + 8);
  ASSERT_OK_AND_ASSIGN(Tensor empty, m.Rows(2, 2));
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_THAT(m.Rows(2, 4), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Tensor::Scalar<int32_t>(1).Rows(0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorTest, Reshape) {
  Tensor v = Tensor::FromVector<float>({1, 2, 3, 4});
  ASSERT_OK_AND_ASSIGN(Tensor m, v.Reshape({2, 2}));
  EXPECT_EQ(m.shape(), Shape({2, 2}));
  EXPECT_EQ(m.data(), v.data());
  EXPECT_THAT(v.Reshape({3}), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("cannot reshape [4]")));
}

TEST(TensorTest, EqualityComparesDtypeShapeAndBytes) {
  Tensor a = Tensor::FromVector<float>({1, 2});
  EXPECT_EQ(a, Tensor::FromVector<float>({1, 2}));
  EXPECT_NE(a, Tensor::FromVector<float>({1, 3}));
  EXPECT_NE(a, Tensor::FromVector<int32_t>({1, 2}));
  EXPECT_NE(a, *a.Reshape({2, 1}));
}

TEST(TensorTest, ZerosForEveryDtype) {
  for (DType d : kAllDTypes) {
    ASSERT_OK_AND_ASSIGN(Tensor z, Tensor::Zeros(d, {2, 3}));
    EXPECT_EQ(z.nbytes(), 6 * ItemSize(d));
    EXPECT_EQ(z.bytes(), std::string(z.nbytes(), '\0'));
  }
}

TEST(TensorTest, ComplexValues) {
  Tensor c = Tensor::FromVector<std::complex<float>>({{1, 1}, {2, -2}});
  EXPECT_EQ(c.dtype(), DType::kComplex64);
  EXPECT_EQ(c.ToVector<std::complex<float>>()[1], std::complex<float>(2, -2));
}

TEST(TensorTest, CheckShapeBoundsEveryDimEvenBesideAZero) {
  const Limits& limits = DefaultLimits();
  EXPECT_THAT(
      CheckShape({int64_t{1} << 62, 0}, DType::kFloat32, limits, "args[1]"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("args[1].shape[0]: dimension "
                         "4611686018427387904 is over the limit of "
                         "1099511627776 (--max_tensor_dim=")));
  // The extent (zero dims counted as 1) is bounded too.
  EXPECT_THAT(
      CheckShape({int64_t{1} << 30, 0, int64_t{1} << 30}, DType::kInt8, limits),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("shape: [1073741824, 0, 1073741824] spans "
                         "more than 1099511627776 elements")));
  EXPECT_THAT(CheckShape({2, -1}, DType::kInt8, limits, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("x.shape[1]: negative dimension -1")));
  ASSERT_OK_AND_ASSIGN(int64_t empty,
                       CheckShape({int64_t{1} << 20, 0}, DType::kInt8, limits));
  EXPECT_EQ(empty, 0);
  ASSERT_OK_AND_ASSIGN(int64_t numel,
                       CheckShape({3, 4}, DType::kComplex128, limits));
  EXPECT_EQ(numel, 12);
  EXPECT_EQ(ShapeExtent({5, 0, 7}), 35);
}

}  // namespace
}  // namespace ferry
