#include "rpc/value/dtype.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"
#include "rpc/value/half.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DTypeTest, NamesRoundTripForAllTwelve) {
  int count = 0;
  for (DType d : kAllDTypes) {
    ASSERT_OK_AND_ASSIGN(DType parsed, ParseDType(DTypeName(d)));
    EXPECT_EQ(parsed, d);
    EXPECT_TRUE(IsValidDType(static_cast<int>(d)));
    ++count;
  }
  EXPECT_EQ(count, 12);
  EXPECT_FALSE(IsValidDType(0));
  EXPECT_FALSE(IsValidDType(13));
}

TEST(DTypeTest, TorchAliases) {
  EXPECT_EQ(*ParseDType("float"), DType::kFloat32);
  EXPECT_EQ(*ParseDType("double"), DType::kFloat64);
  EXPECT_EQ(*ParseDType("half"), DType::kFloat16);
  EXPECT_EQ(*ParseDType("long"), DType::kInt64);
  EXPECT_EQ(*ParseDType("cfloat"), DType::kComplex64);
}

TEST(DTypeTest, UnknownNameIsInvalidArgument) {
  EXPECT_THAT(ParseDType("float8"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown dtype 'float8'")));
}

TEST(DTypeTest, ItemSizes) {
  EXPECT_EQ(ItemSize(DType::kBool), 1u);
  EXPECT_EQ(ItemSize(DType::kInt16), 2u);
  EXPECT_EQ(ItemSize(DType::kFloat16), 2u);
  EXPECT_EQ(ItemSize(DType::kBFloat16), 2u);
  EXPECT_EQ(ItemSize(DType::kInt64), 8u);
  EXPECT_EQ(ItemSize(DType::kComplex64), 8u);
  EXPECT_EQ(ItemSize(DType::kComplex128), 16u);
}

TEST(DTypeTest, PromotionFollowsTorch) {
  EXPECT_EQ(PromoteTypes(DType::kBool, DType::kInt8), DType::kInt8);
  EXPECT_EQ(PromoteTypes(DType::kUInt8, DType::kInt8), DType::kInt16);
  EXPECT_EQ(PromoteTypes(DType::kInt8, DType::kUInt8), DType::kInt16);
  EXPECT_EQ(PromoteTypes(DType::kUInt8, DType::kInt32), DType::kInt32);
  EXPECT_EQ(PromoteTypes(DType::kInt32, DType::kInt64), DType::kInt64);
  EXPECT_EQ(PromoteTypes(DType::kInt64, DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(PromoteTypes(DType::kFloat16, DType::kBFloat16), DType::kFloat32);
  EXPECT_EQ(PromoteTypes(DType::kFloat32, DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(PromoteTypes(DType::kComplex64, DType::kFloat64),
            DType::kComplex128);
  EXPECT_EQ(PromoteTypes(DType::kFloat32, DType::kComplex64),
            DType::kComplex64);
  EXPECT_EQ(PromoteTypes(DType::kComplex64, DType::kComplex128),
            DType::kComplex128);
  for (DType a : kAllDTypes) {
    EXPECT_EQ(PromoteTypes(a, a), a);
    for (DType b : kAllDTypes)
      EXPECT_EQ(PromoteTypes(a, b), PromoteTypes(b, a));
  }
}

TEST(HalfTest, EveryFloat16RoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    Float16 h = Float16::FromBits(static_cast<uint16_t>(bits));
    float f = static_cast<float>(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(Float16(f))));
      continue;
    }
    EXPECT_EQ(Float16(f).bits, bits) << "bits " << bits;
  }
}

TEST(HalfTest, Float16KnownValuesAndRounding) {
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(Float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(Float16(65504.0f).bits, 0x7bff);       // Largest finite.
  EXPECT_EQ(Float16(65536.0f).bits, 0x7c00);       // Overflows to Inf.
  EXPECT_EQ(Float16(5.9604645e-8f).bits, 0x0001);  // Smallest subnormal.
  EXPECT_EQ(Float16(1e-10f).bits, 0x0000);         // Underflows to zero.
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(Float16(1.0f + 0.00048828125f).bits, 0x3c00);
  EXPECT_FLOAT_EQ(static_cast<float>(Float16::FromBits(0x3555)), 0.33325195f);
}

TEST(HalfTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.0f)), 3.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(BFloat16(1.00390625f).bits, 0x3f80);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
}

}  // namespace
}  // namespace ferry
