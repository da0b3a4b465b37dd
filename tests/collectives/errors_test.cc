// Bad inputs and inputs that disagree across ranks: INVALID_ARGUMENT on
// every rank, naming the offending rank and field; and the group works for
// the next op. Mostly on 3 ranks where rank 0 is fine and the culprit is
// rank 1 or 2 (mismatches are reported against rank 0's input).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/collectives/collective_testing.h"
#include "tests/collectives/spmd.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::GetStatus;
using ::ferry::testing::Spmd;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }
Tensor F32(std::vector<float> v) { return Tensor::FromVector<float>(v); }
Tensor I32(std::vector<int32_t> v, Shape shape) {
  return *Tensor::FromVector<int32_t>(v, std::move(shape));
}
Tensor Zeros(DType dtype, Shape shape) {
  return *Tensor::Zeros(dtype, std::move(shape));
}

constexpr int kWorld = 3;

class ErrorsTest : public ::testing::Test {
 protected:
  // One job for the whole suite: every test also checks that its failed
  // ops left the world group usable.
  static void SetUpTestSuite() {
    LocalJob::Options options;
    // Payloads over 64 bytes take the ring paths: mismatches between a
    // small and a large input must be caught before either path starts.
    options.configure = [](WorkerConfig& o) {
      o.collectives.direct_bytes = 64;
    };
    absl::StatusOr<std::unique_ptr<LocalJob>> job =
        LocalJob::Start(kWorld, options);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = job->release();
  }
  static void TearDownTestSuite() {
    delete job_;
    job_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(job_, nullptr); }
  void TearDown() override { ExpectGroupWorks(); }

  template <typename T>
  static std::vector<absl::StatusOr<T>> Run(
      const std::function<absl::StatusOr<T>(ProcessGroup&, int)>& fn) {
    return Spmd<T>(*job_, [&](WorkerImpl& w, int r) {
      return fn(w.collectives().world(), r);
    });
  }

  // The next op on the world group succeeds everywhere.
  static void ExpectGroupWorks() {
    auto out = Run<Tensor>([](ProcessGroup& g, int r) {
      return AllReduce(g, I64({r, 1}));
    });
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(out[r].ok()) << "rank " << r << ": " << out[r].status();
      EXPECT_EQ(*out[r], I64({3, 3})) << "rank " << r;
    }
  }

  static LocalJob* job_;
};

LocalJob* ErrorsTest::job_ = nullptr;

// Every rank failed with INVALID_ARGUMENT and a message holding all of
// `fragments`.
template <typename T>
void ExpectInvalidEverywhere(const std::vector<absl::StatusOr<T>>& out,
                             const std::vector<std::string>& fragments) {
  std::vector<::testing::Matcher<const std::string&>> parts;
  for (const std::string& f : fragments) parts.push_back(HasSubstr(f));
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_THAT(GetStatus(out[r]), StatusIs(absl::StatusCode::kInvalidArgument,
                                            ::testing::AllOfArray(parts)))
        << "rank " << r;
  }
}

// ---- all_reduce ----

TEST_F(ErrorsTest, AllReduceDTypeMismatch) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(g, r == 2 ? F32({1, 2, 3, 4}) : I64({1, 2, 3, 4}));
  });
  ExpectInvalidEverywhere(out, {"all_reduce op ",
                                "rank 2 (worker2) has input float32 [4] but "
                                "rank 0 (worker0) has int64 [4]"});
}

TEST_F(ErrorsTest, AllReduceShapeMismatch) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(
        g, r == 1 ? *I64({1, 2, 3, 4}).Reshape({2, 2}) : I64({1, 2, 3, 4}));
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has input int64 [2, 2] but "
                                "rank 0 (worker0) has int64 [4]"});
}

// Rank 2's input is large (the ring path), the others' small (direct).
TEST_F(ErrorsTest, AllReduceSmallAndLargeMismatch) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(g, Zeros(DType::kFloat32, {r == 2 ? 1000 : 4}));
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2) has input float32 [1000] "
                                "but rank 0 (worker0) has float32 [4]"});
  // And the other way round: only rank 0's is small.
  out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(g, Zeros(DType::kFloat32, {r == 0 ? 4 : 1000}));
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has input float32 [1000] "
                                "but rank 0 (worker0) has float32 [4]"});
}

TEST_F(ErrorsTest, AllReduceOpMismatch) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(g, I64({1}), r == 2 ? ReduceOp::kMax : ReduceOp::kSum);
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2) has op max but rank 0 (worker0) has sum"});
}

TEST_F(ErrorsTest, AllReduceMinMaxOnComplex) {
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    for (DType dt : {DType::kComplex64, DType::kComplex128}) {
      // Every rank asks for it: each refuses its own input.
      auto out = Run<Tensor>([&](ProcessGroup& g, int) {
        return AllReduce(g, Zeros(dt, {2}), op);
      });
      ExpectInvalidEverywhere(
          out,
          {absl::StrCat("op ", ReduceOpName(op), " does not apply to ",
                        DTypeName(dt), ": complex numbers are not ordered"),
           "(worker"});
    }
  }
  // Only rank 1 does (the others sum): rank 1's error, everywhere.
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(g, Zeros(DType::kComplex64, {2}),
                     r == 1 ? ReduceOp::kMax : ReduceOp::kSum);
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1): op max does not apply to "
                                "complex64: complex numbers are not ordered"});
}

TEST_F(ErrorsTest, AllReduceBitwiseOnFloats) {
  for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                     DType::kFloat64, DType::kComplex64}) {
      auto out = Run<Tensor>([&](ProcessGroup& g, int) {
        return AllReduce(g, Zeros(dt, {3}), op);
      });
      ExpectInvalidEverywhere(
          out, {absl::StrCat("op ", ReduceOpName(op), " does not apply to ",
                             DTypeName(dt), ": bitwise ops need integers")});
    }
  }
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllReduce(g, Zeros(DType::kFloat32, {3}),
                     r == 2 ? ReduceOp::kBxor : ReduceOp::kSum);
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2): op bxor does not apply to "
                                "float32: bitwise ops need integers"});
}

TEST_F(ErrorsTest, AllReduceAvgOnIntegers) {
  for (DType dt : {DType::kBool, DType::kUInt8, DType::kInt32}) {
    auto out = Run<Tensor>([&](ProcessGroup& g, int) {
      return AllReduce(g, Zeros(dt, {3}), ReduceOp::kAvg);
    });
    ExpectInvalidEverywhere(
        out, {absl::StrCat("op avg does not apply to ", DTypeName(dt),
                           ": avg needs a floating or complex dtype")});
  }
}

TEST_F(ErrorsTest, UnknownReduceOpByName) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    return RunCollective(g, "all_reduce", Value(I64({1})),
                         Value(Value::Map{{"op", r == 1 ? "median" : "sum"}}));
  });
  ExpectInvalidEverywhere(out,
                          {"rank 1 (worker1): unknown reduce op 'median'"});
}

// ---- all_to_all ----

TEST_F(ErrorsTest, AllToAllDTypeMismatch) {
  auto out = Run<std::vector<Tensor>>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in;
    for (int i = 0; i < kWorld; ++i) in.push_back(r == 2 ? F32({1}) : I64({1}));
    return AllToAll(g, in);
  });
  ExpectInvalidEverywhere(
      out, {"all_to_all op ",
            "rank 2 (worker2) has dtype float32 but rank 0 (worker0) has "
            "int64"});
}

TEST_F(ErrorsTest, AllToAllWrongCount) {
  auto out = Run<std::vector<Tensor>>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in(r == 1 ? 2 : kWorld, I64({1}));
    return AllToAll(g, in);
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1): input must be a list of 3 "
                                "tensors (one per rank), got 2 items"});
}

TEST_F(ErrorsTest, AllToAllMixedDTypesInOneList) {
  auto out = Run<std::vector<Tensor>>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in = {I64({1}), I64({1}), I64({1})};
    if (r == 2) in[1] = F32({1});
    return AllToAll(g, in);
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2): input[1] is float32 but input[0] is int64"});
}

// ---- all_to_all_single ----

TEST_F(ErrorsTest, AllToAllSingleNegativeSplit) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g, I64({1, 2, 3}), {},
                          r == 1 ? std::vector<int64_t>{2, -1, 2}
                                 : std::vector<int64_t>{1, 1, 1});
  });
  ExpectInvalidEverywhere(
      out, {"all_to_all_single op ",
            "rank 1 (worker1): input_splits[1] is negative (-1)"});
}

TEST_F(ErrorsTest, AllToAllSingleWrongSplitCount) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(
        g, I64({1, 2, 3}), {},
        r == 2 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 1, 1});
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2): input_splits has 2 "
                                "entries, the group has 3 ranks"});
}

TEST_F(ErrorsTest, AllToAllSingleSplitsDoNotAddUp) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(
        g, I64({1, 2, 3, 4, 5, 6}), {},
        r == 1 ? std::vector<int64_t>{2, 2, 1} : std::vector<int64_t>{2, 2, 2});
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1): input_splits add up to 5 "
                                "but input has 6 rows"});
}

TEST_F(ErrorsTest, AllToAllSingleNotDivisible) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g, r == 2 ? I64({1, 2, 3, 4}) : I64({1, 2, 3}));
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2): input has 4 rows, not divisible by the group "
            "size 3; pass input_splits"});
}

TEST_F(ErrorsTest, AllToAllSingleZeroDimInput) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g,
                          r == 1 ? Tensor::Scalar<int64_t>(3) : I64({1, 2, 3}));
  });
  ExpectInvalidEverywhere(
      out, {"rank 1 (worker1): input is 0-d: it is split along dimension 0"});
}

TEST_F(ErrorsTest, AllToAllSingleBadOutputSplits) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g, I64({1, 2, 3}),
                          r == 2 ? std::vector<int64_t>{1, -1, 1}
                                 : std::vector<int64_t>{1, 1, 1});
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2): output_splits[1] is negative (-1)"});
  out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g, I64({1, 2, 3}),
                          r == 1 ? std::vector<int64_t>{1, 1, 1, 0}
                                 : std::vector<int64_t>{1, 1, 1});
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1): output_splits has 4 "
                                "entries, the group has 3 ranks"});
}

// Rank 1 expects 2 rows from rank 2, which sends it 1: every rank must
// fail, not only the one whose expectation is wrong.
TEST_F(ErrorsTest, AllToAllSingleOutputSplitsDoNotMatch) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(
        g, I64({1, 2, 3}),
        r == 1 ? std::vector<int64_t>{1, 1, 2} : std::vector<int64_t>{1, 1, 1},
        {1, 1, 1});
  });
  ExpectInvalidEverywhere(out,
                          {"rank 2 (worker2) sent 1 rows to rank 1 (worker1)",
                           "output_splits[2] is 2"});
}

TEST_F(ErrorsTest, AllToAllSingleRowShapeAndDTypeMismatch) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g, Zeros(DType::kInt64, {3, r == 2 ? 2 : 1}));
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2) has rows of int64 [2] but "
                                "rank 0 (worker0) has int64 [1]"});
  out = Run<Tensor>([](ProcessGroup& g, int r) {
    return AllToAllSingle(g,
                          Zeros(r == 1 ? DType::kFloat64 : DType::kInt64, {3}));
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has rows of float64 [] but "
                                "rank 0 (worker0) has int64 []"});
}

// ---- all_gather (torch list form) ----

TEST_F(ErrorsTest, AllGatherListDTypeMismatch) {
  auto out = Run<std::vector<Tensor>>([](ProcessGroup& g, int r) {
    return AllGather(g, r == 2 ? F32({1}) : I64({1, 2}));
  });
  ExpectInvalidEverywhere(
      out, {"all_gather op ",
            "rank 2 (worker2) has dtype float32 but rank 0 (worker0) has "
            "int64"});
  // The same with rank 2's tensor large (ring) and the others small.
  out = Run<std::vector<Tensor>>([](ProcessGroup& g, int r) {
    return AllGather(g, r == 2 ? Zeros(DType::kFloat32, {1000}) : I64({1}));
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2) has dtype float32 but rank "
                                "0 (worker0) has int64"});
}

// ---- all_gather (tf form, along an axis) ----

TEST_F(ErrorsTest, AllGatherAxisListLengthMismatch) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    Value::List v = {I32({1, 2}, {2}), I32({3}, {1})};
    if (r == 1) v.push_back(I32({4}, {1}));
    return AllGather(g, Value(v), 0);
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has value a list of 3 but "
                                "rank 0 (worker0) has a list of 2"});
}

TEST_F(ErrorsTest, AllGatherAxisMapKeysMismatch) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(g,
                     Value(Value::Map{{"a", I32({1}, {1})},
                                      {r == 2 ? "c" : "b", I32({2}, {1})}}),
                     0);
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2) has value a map with keys [\"a\",\"c\"] but "
            "rank 0 (worker0) has a map with keys [\"a\",\"b\"]"});
}

TEST_F(ErrorsTest, AllGatherAxisTensorWhereListExpected) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    Value a =
        r == 2 ? Value(Value::List{I32({1, 2}, {2})}) : Value(I32({1, 2}, {2}));
    return AllGather(g, Value(Value::Map{{"a", a}}), 0);
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2) has value[\"a\"] a list of "
                                "1 but rank 0 (worker0) has int32 [2]"});
}

TEST_F(ErrorsTest, AllGatherAxisShapeMismatchOffAxis) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    Tensor t =
        r == 1 ? Zeros(DType::kInt32, {2, 4}) : Zeros(DType::kInt32, {2, 3});
    return AllGather(g, Value(Value::List{I32({1}, {1}), t}), 0);
  });
  ExpectInvalidEverywhere(
      out, {"rank 1 (worker1) has value[1] int32 [2, 4] but rank 0 (worker0) "
            "has int32 [2, 3] (shapes may differ only along axis 0)"});
  // Along axis 1 the same shapes are fine; rows differing are not.
  out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(g, Value(Zeros(DType::kInt32, {r == 2 ? 3 : 2, 3})), 1);
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2) has value int32 [3, 3] but rank 0 (worker0) has "
            "int32 [2, 3] (shapes may differ only along axis 1)"});
}

TEST_F(ErrorsTest, AllGatherAxisRankAndDTypeMismatch) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(
        g, Value(Zeros(DType::kInt32, r == 2 ? Shape{2, 1} : Shape{2})), 0);
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2) has value int32 [2, 1] but "
                                "rank 0 (worker0) has int32 [2]"});
  out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(
        g, Value(Zeros(r == 1 ? DType::kFloat32 : DType::kInt32, {2})), 0);
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has value float32 [2] but "
                                "rank 0 (worker0) has int32 [2]"});
}

TEST_F(ErrorsTest, AllGatherAxisZeroDimTensor) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(
        g,
        Value(Value::List{I32({1}, {1}),
                          r == 1 ? Tensor::Scalar<int32_t>(2) : I32({2}, {1})}),
        0);
  });
  ExpectInvalidEverywhere(
      out, {"rank 1 (worker1): value[1] is a 0-d tensor: all_gather along an "
            "axis needs rank >= 1 (expand it first)"});
  // Every rank passing a scalar: each refuses its own.
  out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(g, Value(Tensor::Scalar<float>(r)), 0);
  });
  ExpectInvalidEverywhere(out, {"value is a 0-d tensor"});
}

TEST_F(ErrorsTest, AllGatherAxisOutOfRangeOrDifferent) {
  auto out = Run<Value>([](ProcessGroup& g, int) {
    return AllGather(g, Value(Zeros(DType::kInt32, {2, 3})), 2);
  });
  ExpectInvalidEverywhere(out,
                          {"axis 2 is out of range for value of shape [2, 3]"});
  out = Run<Value>([](ProcessGroup& g, int) {
    return AllGather(g, Value(Zeros(DType::kInt32, {2, 3})), -3);
  });
  ExpectInvalidEverywhere(out, {"axis -3 is out of range"});
  out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(g, Value(Zeros(DType::kInt32, {2, 2})), r == 1 ? 1 : 0);
  });
  ExpectInvalidEverywhere(
      out, {"rank 1 (worker1) has axis 1 but rank 0 (worker0) has 0"});
}

TEST_F(ErrorsTest, AllGatherAxisNonTensorLeaf) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    return AllGather(
        g, Value(Value::List{r == 2 ? Value("x") : Value(I32({1}, {1}))}), 0);
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2): value[0] is a string: all_gather along an axis "
            "takes tensors, in lists and maps"});
}

// ---- reduce_scatter ----

TEST_F(ErrorsTest, ReduceScatterBadInputs) {
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in(r == 1 ? 2 : kWorld, I64({1}));
    return ReduceScatter(g, in);
  });
  ExpectInvalidEverywhere(out, {"reduce_scatter op ",
                                "rank 1 (worker1): input must be a list of "
                                "3 tensors (one per rank), got 2 items"});
  // The single-tensor form: dim 0 not divisible by the group size.
  auto single = Run<Value>([](ProcessGroup& g, int r) {
    return RunCollective(g, "reduce_scatter",
                         Value(r == 2 ? I64({1, 2, 3, 4}) : I64({1, 2, 3})),
                         Value());
  });
  ExpectInvalidEverywhere(
      single, {"rank 2 (worker2): input tensor(int64, [4]) cannot be cut into "
               "3 equal blocks along dimension 0; pass a list of 3 tensors"});
  // 0-d.
  single = Run<Value>([](ProcessGroup& g, int) {
    return RunCollective(g, "reduce_scatter", Value(Tensor::Scalar<float>(1)),
                         Value());
  });
  ExpectInvalidEverywhere(single, {"cannot be cut into 3 equal blocks"});
}

TEST_F(ErrorsTest, ReduceScatterMismatches) {
  // Block 1 of rank 2 has another shape.
  auto out = Run<Tensor>([](ProcessGroup& g, int r) {
    return ReduceScatter(
        g, {I64({1}), r == 2 ? I64({1, 2, 3}) : I64({1, 2}), I64({1})});
  });
  ExpectInvalidEverywhere(out, {"rank 2 (worker2) has input[1] int64 [3] but "
                                "rank 0 (worker0) has int64 [2]"});
  // dtype.
  out = Run<Tensor>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in(kWorld, r == 1 ? F32({1}) : I64({1}));
    return ReduceScatter(g, in);
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has input[0] float32 [1] "
                                "but rank 0 (worker0) has int64 [1]"});
  // Reduce op.
  out = Run<Tensor>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in(kWorld, I64({1}));
    return ReduceScatter(g, in, r == 2 ? ReduceOp::kProd : ReduceOp::kSum);
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2) has op prod but rank 0 (worker0) has sum"});
  // A large block (ring) against a small one.
  out = Run<Tensor>([](ProcessGroup& g, int r) {
    std::vector<Tensor> in(kWorld, Zeros(DType::kFloat64, {4}));
    if (r == 1) in[2] = Zeros(DType::kFloat64, {500});
    return ReduceScatter(g, in);
  });
  ExpectInvalidEverywhere(out, {"rank 1 (worker1) has input[2] float64 [500] "
                                "but rank 0 (worker0) has float64 [4]"});
  // min on complex; bitwise on floats.
  out = Run<Tensor>([](ProcessGroup& g, int) {
    std::vector<Tensor> in(kWorld, Zeros(DType::kComplex128, {1}));
    return ReduceScatter(g, in, ReduceOp::kMin);
  });
  ExpectInvalidEverywhere(
      out, {"op min does not apply to complex128: complex numbers are not "
            "ordered"});
  out = Run<Tensor>([](ProcessGroup& g, int) {
    std::vector<Tensor> in(kWorld, Zeros(DType::kFloat32, {1}));
    return ReduceScatter(g, in, ReduceOp::kBor);
  });
  ExpectInvalidEverywhere(
      out, {"op bor does not apply to float32: bitwise ops need integers"});
}

// ---- broadcast, scatter, gather: src and dst ----

TEST_F(ErrorsTest, BadSrcAndDst) {
  for (int bad : {kWorld, 7, -1}) {
    const std::string field = absl::StrCat(
        "\" ", bad, " is not a rank of the group (size ", kWorld, ")");
    auto b = Run<Value>(
        [&](ProcessGroup& g, int) { return Broadcast(g, Value(1), bad); });
    ExpectInvalidEverywhere(b, {"broadcast op ", "\"src" + field});
    auto s = Run<Value>([&](ProcessGroup& g, int) {
      return Scatter(g, {Value(1), Value(2), Value(3)}, bad);
    });
    ExpectInvalidEverywhere(s, {"scatter op ", "\"src" + field});
    auto gathered = Run<std::vector<Value>>(
        [&](ProcessGroup& g, int) { return Gather(g, Value(1), bad); });
    ExpectInvalidEverywhere(gathered, {"gather op ", "\"dst" + field});
  }
  auto missing = Run<Value>([](ProcessGroup& g, int) {
    return RunCollective(g, "broadcast", Value(1), Value());
  });
  ExpectInvalidEverywhere(missing, {"missing \"src\""});
  auto wrong_kind = Run<Value>([](ProcessGroup& g, int) {
    return RunCollective(g, "gather", Value(1),
                         Value(Value::Map{{"dst", "zero"}}));
  });
  ExpectInvalidEverywhere(wrong_kind,
                          {"\"dst\" must be an integer, got string"});
}

// Ranks that disagree on src/dst: the rooted ops do not exchange them (that
// would cost a round), so this is not INVALID_ARGUMENT; but since every
// rank waits for the root's release, no rank returns OK either: each fails
// by its deadline (an out-of-range src fails at once where it is given).
TEST_F(ErrorsTest, SrcOrDstDifferentOnOneRankFailsEveryRank) {
  CollectiveOptions timeout;
  timeout.timeout = absl::Milliseconds(800);
  auto expect_all_failed = [](const auto& out) {
    for (size_t r = 0; r < out.size(); ++r) {
      EXPECT_FALSE(out[r].ok()) << "rank " << r;
    }
  };
  expect_all_failed(Run<Value>([&](ProcessGroup& g, int r) {
    return Broadcast(g, Value(r), r == 1 ? 2 : 0, timeout);
  }));
  expect_all_failed(Run<Value>([&](ProcessGroup& g, int r) {
    return Broadcast(g, Value(r), r == 1 ? 7 : 0, timeout);
  }));
  expect_all_failed(Run<std::vector<Value>>([&](ProcessGroup& g, int r) {
    return Gather(g, Value(r), r == 2 ? 1 : 0, timeout);
  }));
  expect_all_failed(Run<Value>([&](ProcessGroup& g, int r) {
    return Scatter(g, std::vector<Value>(3, Value(r)), r == 2 ? 1 : 0, timeout);
  }));
}

TEST_F(ErrorsTest, ScatterSourceNeedsOneValuePerRank) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    std::vector<Value> values;
    if (r == 1) values = {Value(1), Value(2)};
    return Scatter(g, values, 1);
  });
  ExpectInvalidEverywhere(
      out, {"rank 1 (worker1): the input of scatter's source must be a list "
            "of 3 values (one per rank), got 2 items"});
}

// ---- by name ----

TEST_F(ErrorsTest, UnknownCollective) {
  auto out = Run<Value>([](ProcessGroup& g, int) {
    return RunCollective(g, "all_sum", Value(), Value());
  });
  ExpectInvalidEverywhere(
      out, {"unknown collective \"all_sum\"; known: ", "all_gather",
            "all_reduce", "all_to_all_single", "barrier", "broadcast", "gather",
            "reduce_scatter", "scatter"});
}

TEST_F(ErrorsTest, NonTensorInputs) {
  auto out = Run<Value>([](ProcessGroup& g, int r) {
    return RunCollective(g, "all_reduce", r == 2 ? Value("x") : Value(I64({1})),
                         Value());
  });
  ExpectInvalidEverywhere(
      out, {"rank 2 (worker2): input must be a tensor, got string"});
  out = Run<Value>([](ProcessGroup& g, int r) {
    return RunCollective(
        g, "all_to_all_single",
        Value(
            Value::Map{{"input", I64({1, 2, 3})},
                       {"input_splits", r == 1 ? Value(Value::List{1, "1", 1})
                                               : Value(Value::List{1, 1, 1})}}),
        Value());
  });
  ExpectInvalidEverywhere(
      out, {"rank 1 (worker1): input_splits entries must be integers, got "
            "string"});
}

// The same failures one after another, each followed by a good op: nothing
// of a failed op leaks into the next (also checked after every test).
TEST_F(ErrorsTest, RepeatedFailuresLeaveNothingBehind) {
  for (int i = 0; i < 5; ++i) {
    auto out = Run<Tensor>([&](ProcessGroup& g, int r) {
      return AllReduce(g, Zeros(DType::kInt32, {r == i % kWorld ? 2 : 1}));
    });
    for (const auto& s : out)
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    ExpectGroupWorks();
  }
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(job_->worker(r).collectives().mailbox().held_messages(), 0)
        << "rank " << r;
  }
}

}  // namespace
}  // namespace ferry
