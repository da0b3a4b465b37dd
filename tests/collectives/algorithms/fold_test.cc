// Fold: a partial folded into the result as its bytes arrive, in ranges
// cut anywhere (elements split between ranges), into separate memory and
// in place, gives the bits of reducing the whole partial at once.
#include "collectives/algorithms/fold.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "rpc/value/tensor_builder.h"
#include "tests/collectives/collective_testing.h"

namespace ferry {
namespace {

using ::ferry::testing::Applies;
using ::ferry::testing::kAllReduceOps;
using ::ferry::testing::Sample;

// The ranges [0, n) cut at random places, some one byte long.
std::vector<uint64_t> Cuts(uint64_t n, std::mt19937& rng) {
  std::vector<uint64_t> cuts{0};
  while (cuts.back() < n) {
    const uint64_t step = rng() % 3 == 0 ? 1 : 1 + rng() % 29;
    cuts.push_back(std::min(n, cuts.back() + step));
  }
  return cuts;
}

// The bytes of mine ⊕ theirs, reduced at once.
std::vector<char> Reference(ReduceOp op, const Tensor& mine,
                            const Tensor& theirs) {
  std::vector<char> want(mine.nbytes());
  ReduceTo(op, mine.dtype(), want.data(), mine.data(), theirs.data(),
           mine.numel());
  return want;
}

TEST(FoldTest, RangesCutAnywhereGiveTheWholeReduction) {
  std::mt19937 rng(7);
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!Applies(op, dtype)) continue;
      const Tensor mine = Sample(dtype, {37}, 3);
      const Tensor theirs = Sample(dtype, {37}, 11);
      ASSERT_TRUE(Fold::Foldable(mine));
      std::vector<char> out(mine.nbytes(), '\x5a');
      Fold fold(op, mine, out.data());
      const std::vector<uint64_t> cuts = Cuts(mine.nbytes(), rng);
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        EXPECT_FALSE(fold.done());
        ASSERT_TRUE(fold.Write(cuts[i], theirs.data() + cuts[i],
                               cuts[i + 1] - cuts[i]));
      }
      EXPECT_TRUE(fold.done());
      EXPECT_EQ(out, Reference(op, mine, theirs))
          << DTypeName(dtype) << " " << ReduceOpName(op);
    }
  }
}

// The transport's slices start anywhere: bytes at an odd address, more
// of them than one bounce buffer holds.
TEST(FoldTest, MisalignedBytesAreFolded) {
  for (DType dtype :
       {DType::kInt16, DType::kFloat32, DType::kFloat64, DType::kComplex128}) {
    const Tensor mine = Sample(dtype, {3001}, 4);
    const Tensor theirs = Sample(dtype, {3001}, 9);
    std::vector<char> odd(theirs.nbytes() + 1);
    std::memcpy(odd.data() + 1, theirs.data(), theirs.nbytes());
    std::vector<char> out(mine.nbytes());
    Fold fold(ReduceOp::kSum, mine, out.data());
    ASSERT_TRUE(fold.Write(0, odd.data() + 1, theirs.nbytes()));
    EXPECT_TRUE(fold.done());
    EXPECT_EQ(out, Reference(ReduceOp::kSum, mine, theirs)) << DTypeName(dtype);
  }
}

TEST(FoldTest, InPlaceReadsEachElementBeforeWritingIt) {
  std::mt19937 rng(11);
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kComplex128,
                      DType::kInt16, DType::kBool}) {
    const Tensor theirs = Sample(dtype, {53}, 5);
    TensorBuilder mem = *TensorBuilder::Create(dtype, {53});
    const Tensor original = Sample(dtype, {53}, 2);
    std::memcpy(mem.data(), original.data(), original.nbytes());
    char* at = mem.data();
    const Tensor mine = std::move(mem).Build();  // `out` is its memory.
    Fold fold(ReduceOp::kSum, mine, at);
    const std::vector<uint64_t> cuts = Cuts(mine.nbytes(), rng);
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      ASSERT_TRUE(
          fold.Write(cuts[i], theirs.data() + cuts[i], cuts[i + 1] - cuts[i]));
    }
    EXPECT_TRUE(fold.done());
    const std::vector<char> want = Reference(ReduceOp::kSum, original, theirs);
    EXPECT_EQ(std::vector<char>(at, at + mine.nbytes()), want)
        << DTypeName(dtype);
  }
}

TEST(FoldTest, RefusesRangesOutOfOrderOrPastTheEnd) {
  const Tensor mine = Sample(DType::kFloat32, {4}, 1);
  const Tensor theirs = Sample(DType::kFloat32, {4}, 2);
  std::vector<char> out(mine.nbytes());
  Fold fold(ReduceOp::kSum, mine, out.data());
  EXPECT_FALSE(fold.Write(4, theirs.data() + 4, 4));  // Skips bytes 0-3.
  ASSERT_TRUE(fold.Write(0, theirs.data(), 6));
  EXPECT_FALSE(fold.Write(0, theirs.data(), 2));       // Goes back.
  EXPECT_FALSE(fold.Write(6, theirs.data() + 6, 11));  // Past 16 bytes.
  EXPECT_FALSE(fold.done());
  ASSERT_TRUE(fold.Write(6, theirs.data() + 6, 10));
  EXPECT_TRUE(fold.done());
  EXPECT_EQ(out, Reference(ReduceOp::kSum, mine, theirs));
}

}  // namespace
}  // namespace ferry
