// The seed pages' examples through the C++ API: torch.distributed.all_to_all
// (even, uneven splits, complex) and tf's ReplicaContext.all_gather (one
// tensor, a nested list, different sizes along the axis), with the two
// seed errors docs/DESIGN.md names corrected.
#include <complex>
#include <memory>
#include <vector>

#include "collectives/collectives.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/collectives/spmd.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Spmd;

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }
Tensor I32(std::vector<int32_t> v, Shape shape) {
  return *Tensor::FromVector<int32_t>(v, std::move(shape));
}

class SeedTest : public ::ferry::testing::JobTest {};

// input = arange(4) + rank * 4, chunked in 4; output[i] = rank i's chunk.
TEST_F(SeedTest, AllToAllEven) {
  Start(4);
  auto out = Spmd<std::vector<Tensor>>(*job_, [](WorkerImpl& w, int rank) {
    std::vector<Tensor> in;
    for (int i = 0; i < 4; ++i) in.push_back(I64({rank * 4 + i}));
    return AllToAll(w.collectives().world(), in);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK(out[r]);
    std::vector<Tensor> want;
    for (int i = 0; i < 4; ++i) want.push_back(I64({i * 4 + r}));
    EXPECT_EQ(*out[r], want) << "rank " << r;
  }
}

const std::vector<std::vector<int64_t>> kInputs = {
    {0, 1, 2, 3, 4, 5},
    {10, 11, 12, 13, 14, 15, 16, 17, 18},
    {20, 21, 22, 23, 24},
    {30, 31, 32, 33, 34, 35, 36}};
const std::vector<std::vector<int64_t>> kInputSplits = {
    {2, 2, 1, 1}, {3, 2, 2, 2}, {2, 1, 1, 1}, {2, 2, 2, 1}};
const std::vector<std::vector<int64_t>> kOutputSplits = {
    {2, 3, 2, 2}, {2, 2, 1, 2}, {1, 2, 1, 2}, {1, 2, 1, 1}};
const std::vector<std::vector<int64_t>> kOutputs = {
    {0, 1, 10, 11, 12, 20, 21, 30, 31},
    {2, 3, 13, 14, 22, 32, 33},
    {4, 15, 16, 23, 34, 35},
    {5, 17, 18, 24, 36}};

TEST_F(SeedTest, AllToAllSingleUnevenSplits) {
  Start(4);
  for (bool with_output_splits : {true, false}) {
    auto out = Spmd<Tensor>(*job_, [&](WorkerImpl& w, int rank) {
      return AllToAllSingle(
          w.collectives().world(), I64(kInputs[rank]),
          with_output_splits ? kOutputSplits[rank] : std::vector<int64_t>{},
          kInputSplits[rank]);
    });
    for (int r = 0; r < 4; ++r) {
      ASSERT_OK(out[r]);
      EXPECT_EQ(*out[r], I64(kOutputs[r])) << "rank " << r;
    }
  }
}

// The same data as lists of split tensors through the list form.
TEST_F(SeedTest, AllToAllUnevenLists) {
  Start(4);
  auto out = Spmd<std::vector<Tensor>>(*job_, [&](WorkerImpl& w, int rank) {
    std::vector<Tensor> in;
    int64_t at = 0;
    for (int64_t n : kInputSplits[rank]) {
      in.push_back(*I64(kInputs[rank]).Rows(at, at + n));
      at += n;
    }
    return AllToAll(w.collectives().world(), in);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK(out[r]);
    std::vector<int64_t> joined;
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ((*out[r])[i].numel(), kOutputSplits[r][i]);
      for (int64_t x : (*out[r])[i].ToVector<int64_t>()) joined.push_back(x);
    }
    EXPECT_EQ(joined, kOutputs[r]) << "rank " << r;
  }
}

TEST_F(SeedTest, AllToAllComplex) {
  Start(4);
  using C = std::complex<float>;
  auto out = Spmd<std::vector<Tensor>>(*job_, [](WorkerImpl& w, int rank) {
    std::vector<Tensor> in;
    for (int i = 0; i < 4; ++i) {
      float x = static_cast<float>(i + 1 + 4 * rank);
      in.push_back(Tensor::FromVector<C>({C(x, x)}));
    }
    return AllToAll(w.collectives().world(), in);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_OK(out[r]);
    for (int i = 0; i < 4; ++i) {
      float x = static_cast<float>(r + 1 + 4 * i);
      EXPECT_EQ((*out[r])[i], Tensor::FromVector<C>({C(x, x)}))
          << "rank " << r << " [" << i << "]";
    }
  }
}

TEST_F(SeedTest, AllGatherSingleTensor) {
  Start(2);
  auto out = Spmd<Value>(*job_, [](WorkerImpl& w, int) {
    return AllGather(w.collectives().world(), Value(I32({1, 2, 3}, {3})), 0);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_EQ(*out[r], Value(I32({1, 2, 3, 1, 2, 3}, {6})));
  }
}

TEST_F(SeedTest, AllGatherNestedList) {
  Start(2);
  auto out = Spmd<Value>(*job_, [](WorkerImpl& w, int) {
    Value nest(Value::List{I32({1, 2, 3}, {3}), I32({1, 2, 3, 4}, {2, 2})});
    return AllGather(w.collectives().world(), nest, 0);
  });
  Value want(Value::List{I32({1, 2, 3, 1, 2, 3}, {6}),
                         I32({1, 2, 3, 4, 1, 2, 3, 4}, {4, 2})});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_EQ(*out[r], want) << ToJson(*out[r]);
  }
}

// Replica 0: {'a': [0], 'b': [[0, 1]]}; replica 1: {'a': [1], 'b': [[2, 3],
// [4, 5]]}; gathered along axis 0: {'a': [0, 1], 'b': [[0, 1], [2, 3], [4,
// 5]]} ('a' is [0, 1]: the seed's [1, 2] is one of its two errors).
TEST_F(SeedTest, AllGatherDifferentSizesAlongAxis) {
  Start(2);
  auto out = Spmd<Value>(*job_, [](WorkerImpl& w, int rank) {
    Value v = rank == 0 ? Value(Value::Map{{"a", I32({0}, {1})},
                                           {"b", I32({0, 1}, {1, 2})}})
                        : Value(Value::Map{{"a", I32({1}, {1})},
                                           {"b", I32({2, 3, 4, 5}, {2, 2})}});
    return AllGather(w.collectives().world(), v, 0);
  });
  Value want(Value::Map{{"a", I32({0, 1}, {2})},
                        {"b", I32({0, 1, 2, 3, 4, 5}, {3, 2})}});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_EQ(*out[r], want) << ToJson(*out[r]);
  }
}

}  // namespace
}  // namespace ferry
