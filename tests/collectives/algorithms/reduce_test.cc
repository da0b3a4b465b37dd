#include "collectives/algorithms/reduce.h"

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/tensor_builder.h"
#include "tests/collectives/collective_testing.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::C;
using ::ferry::testing::Elements;
using ::ferry::testing::kAllReduceOps;
using ::ferry::testing::MakeTensor;
using ::ferry::testing::SameTensor;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ReduceOpTest, NamesRoundTrip) {
  const std::vector<std::string> names = {"sum", "prod", "min", "max",
                                          "avg", "band", "bor", "bxor"};
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(ReduceOp op, ParseReduceOp(names[i]));
    EXPECT_EQ(op, kAllReduceOps[i]);
    EXPECT_EQ(ReduceOpName(op), names[i]);
  }
  EXPECT_THAT(ParseReduceOp("mean"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown reduce op 'mean' (sum, prod, min, "
                                 "max, avg, band, bor, bxor)")));
  EXPECT_THAT(ParseReduceOp("SUM"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ReduceOpTest, CheckReduceOpRefusals) {
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      absl::Status s = CheckReduceOp(op, dt);
      if (::ferry::testing::Applies(op, dt)) {
        EXPECT_OK(s);
        continue;
      }
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr(absl::StrCat("op ", ReduceOpName(op),
                                                     " does not apply to ",
                                                     DTypeName(dt), ": "))))
          << ReduceOpName(op) << " on " << DTypeName(dt);
    }
  }
  EXPECT_THAT(CheckReduceOp(ReduceOp::kMin, DType::kComplex64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("complex numbers are not ordered")));
  EXPECT_THAT(CheckReduceOp(ReduceOp::kBxor, DType::kFloat16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bitwise ops need integers")));
  EXPECT_THAT(CheckReduceOp(ReduceOp::kBand, DType::kComplex128),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bitwise ops need integers")));
  EXPECT_THAT(CheckReduceOp(ReduceOp::kAvg, DType::kInt64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("avg needs a floating or complex dtype")));
  EXPECT_THAT(CheckReduceOp(ReduceOp::kAvg, DType::kBool),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// acc ⊕= in for every applicable op and dtype, against the test's own
// reduction (avg adds: FinishAverage divides).
TEST(ReduceIntoTest, EveryOpOnEveryDType) {
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!::ferry::testing::Applies(op, dt)) continue;
      SCOPED_TRACE(absl::StrCat(ReduceOpName(op), " on ", DTypeName(dt)));
      const Tensor a = ::ferry::testing::Sample(dt, {3, 5}, 3);
      const Tensor b = ::ferry::testing::Sample(dt, {3, 5}, 11);
      TensorBuilder acc = *TensorBuilder::Create(dt, {3, 5});
      std::memcpy(acc.data(), a.data(), a.nbytes());
      ReduceInto(op, dt, acc.data(), b.data(), a.numel());
      const ReduceOp as = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
      const Tensor want = MakeTensor(
          dt, {3, 5},
          ::ferry::testing::Reduce(as, dt, {Elements(a), Elements(b)}));
      EXPECT_TRUE(SameTensor(std::move(acc).Build(), want));
      // The same into a third buffer, `a` untouched.
      TensorBuilder out = *TensorBuilder::Create(dt, {3, 5});
      ReduceTo(op, dt, out.data(), a.data(), b.data(), a.numel());
      EXPECT_TRUE(SameTensor(std::move(out).Build(), want));
      EXPECT_TRUE(SameTensor(a, ::ferry::testing::Sample(dt, {3, 5}, 3)));
    }
  }
}

TEST(ReduceIntoTest, SpecificValues) {
  // Integers wrap like torch (no UB).
  {
    Tensor a = Tensor::FromVector<int8_t>({127, -128, 100, -7});
    Tensor b = Tensor::FromVector<int8_t>({1, -1, 2, 3});
    TensorBuilder acc = *TensorBuilder::Create(DType::kInt8, {4});
    std::memcpy(acc.data(), a.data(), a.nbytes());
    ReduceInto(ReduceOp::kSum, DType::kInt8, acc.data(), b.data(), 4);
    EXPECT_EQ(std::move(acc).Build(),
              Tensor::FromVector<int8_t>({-128, 127, 102, -4}));
  }
  {
    Tensor a = Tensor::FromVector<uint8_t>({200, 0xF0, 7});
    Tensor b = Tensor::FromVector<uint8_t>({2, 0x3C, 9});
    for (auto [op, want] :
         std::vector<std::pair<ReduceOp, std::vector<uint8_t>>>{
             {ReduceOp::kProd, {144, 0x40, 63}},
             {ReduceOp::kBand, {0, 0x30, 1}},
             {ReduceOp::kBor, {202, 0xFC, 15}},
             {ReduceOp::kBxor, {202, 0xCC, 14}},
             {ReduceOp::kMin, {2, 0x3C, 7}},
             {ReduceOp::kMax, {200, 0xF0, 9}}}) {
      TensorBuilder acc = *TensorBuilder::Create(DType::kUInt8, {3});
      std::memcpy(acc.data(), a.data(), a.nbytes());
      ReduceInto(op, DType::kUInt8, acc.data(), b.data(), 3);
      EXPECT_EQ(std::move(acc).Build(), Tensor::FromVector<uint8_t>(want))
          << ReduceOpName(op);
    }
  }
  // bool: sum is "or", prod "and", bxor "not equal".
  {
    Tensor a = Tensor::FromVector<bool>({false, false, true, true});
    Tensor b = Tensor::FromVector<bool>({false, true, false, true});
    for (auto [op, want] : std::vector<std::pair<ReduceOp, std::vector<bool>>>{
             {ReduceOp::kSum, {false, true, true, true}},
             {ReduceOp::kMax, {false, true, true, true}},
             {ReduceOp::kBor, {false, true, true, true}},
             {ReduceOp::kProd, {false, false, false, true}},
             {ReduceOp::kMin, {false, false, false, true}},
             {ReduceOp::kBand, {false, false, false, true}},
             {ReduceOp::kBxor, {false, true, true, false}}}) {
      TensorBuilder acc = *TensorBuilder::Create(DType::kBool, {4});
      std::memcpy(acc.data(), a.data(), a.nbytes());
      ReduceInto(op, DType::kBool, acc.data(), b.data(), 4);
      EXPECT_EQ(std::move(acc).Build(), Tensor::FromVector<bool>(want))
          << ReduceOpName(op);
    }
  }
  // float16 rounds each step back to half precision; complex prod.
  {
    Tensor a = MakeTensor(DType::kFloat16, {2}, {2048.0, 0.1});
    Tensor b = MakeTensor(DType::kFloat16, {2}, {1.0, 0.2});
    TensorBuilder acc = *TensorBuilder::Create(DType::kFloat16, {2});
    std::memcpy(acc.data(), a.data(), a.nbytes());
    ReduceInto(ReduceOp::kSum, DType::kFloat16, acc.data(), b.data(), 2);
    std::vector<C> got = Elements(std::move(acc).Build());
    EXPECT_EQ(got[0], C(2048.0));  // 2049 is not a float16
    EXPECT_NEAR(got[1].real(), 0.3, 1e-3);
  }
  {
    using CF = std::complex<float>;
    Tensor a = Tensor::FromVector<CF>({CF(1, 2), CF(0, 1)});
    Tensor b = Tensor::FromVector<CF>({CF(3, -1), CF(0, 1)});
    TensorBuilder acc = *TensorBuilder::Create(DType::kComplex64, {2});
    std::memcpy(acc.data(), a.data(), a.nbytes());
    ReduceInto(ReduceOp::kProd, DType::kComplex64, acc.data(), b.data(), 2);
    EXPECT_EQ(std::move(acc).Build(),
              Tensor::FromVector<CF>({CF(5, 5), CF(-1, 0)}));
  }
  // Zero elements: nothing touched.
  ReduceInto(ReduceOp::kSum, DType::kFloat32, nullptr, nullptr, 0);
}

TEST(FinishAverageTest, DividesFloatingAndComplex) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                   DType::kFloat64, DType::kComplex64, DType::kComplex128}) {
    SCOPED_TRACE(DTypeName(dt));
    const std::vector<C> sums = {C(3, 1), C(-6, 0), C(1.5, -3), C(0, 0)};
    const bool complex = KindOf(dt) == DTypeKind::kComplex;
    std::vector<C> in, want;
    for (const C& s : sums) {
      in.push_back(complex ? s : C(s.real()));
      want.push_back(complex ? s / 3.0 : C(s.real() / 3.0));
    }
    Tensor sum = MakeTensor(dt, {2, 2}, in);
    Tensor avg = Averaged(sum, 3);
    EXPECT_TRUE(SameTensor(avg, MakeTensor(dt, {2, 2}, want)));
    // Averaged makes a new tensor.
    EXPECT_TRUE(SameTensor(sum, MakeTensor(dt, {2, 2}, in)));
    TensorBuilder b = *TensorBuilder::Create(dt, {2, 2});
    std::memcpy(b.data(), sum.data(), sum.nbytes());
    FinishAverage(dt, b.data(), 4, 3);
    EXPECT_EQ(std::move(b).Build(), avg);
  }
  // Integers are left alone (avg is refused for them before this point).
  Tensor ints = Tensor::FromVector<int32_t>({3, 7});
  TensorBuilder b = *TensorBuilder::Create(DType::kInt32, {2});
  std::memcpy(b.data(), ints.data(), ints.nbytes());
  FinishAverage(DType::kInt32, b.data(), 2, 2);
  EXPECT_EQ(std::move(b).Build(), ints);
  // Zero-size and 0-d.
  EXPECT_EQ(Averaged(*Tensor::Zeros(DType::kFloat32, {0, 3}), 4),
            *Tensor::Zeros(DType::kFloat32, {0, 3}));
  EXPECT_EQ(Averaged(Tensor::Scalar<double>(9), 4),
            Tensor::Scalar<double>(2.25));
}

}  // namespace
}  // namespace ferry
