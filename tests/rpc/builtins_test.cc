#include "rpc/builtins.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/base/cancellation.h"
#include "rpc/base/limits.h"
#include "rpc/registry.h"
#include "rpc/value/half.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_math.h"
#include "rpc/value/value.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensor_samples.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::SampleTensor;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class BuiltinsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK(RegisterBuiltins(&registry_, &timers_)); }
  // Every sleep ended (by its time, its deadline or a cancel) holds no timer.
  void TearDown() override { EXPECT_FALSE(timers_.has_pending()); }

  Future<Value> Start(const std::string& name, std::vector<Value> args) {
    std::shared_ptr<const RegisteredFunction> fn = registry_.Find(name);
    if (fn == nullptr) {
      return Future<Value>::Ready(absl::NotFoundError(name));
    }
    return InvokeFunction(*fn, ctx_, std::move(args));
  }

  absl::StatusOr<Value> Call(const std::string& name, std::vector<Value> args) {
    return Start(name, std::move(args)).Wait(absl::Seconds(5));
  }

  // Calls `name` and returns its tensor result (or fails the test).
  Tensor CallTensor(const std::string& name, std::vector<Value> args) {
    absl::StatusOr<Value> r = Call(name, std::move(args));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return Tensor();
    EXPECT_TRUE(r->is_tensor()) << r->kind_name();
    return r->is_tensor() ? r->as_tensor() : Tensor();
  }

  // sleep_ms runs on these: the tests step time by hand.
  ManualClock clock_;
  ManualTimers timers_{&clock_};
  Registry registry_;
  CallContext ctx_;
};

// ---- Registration ----

TEST_F(BuiltinsTest, RegistersEveryBuiltin) {
  std::vector<std::string> names;
  for (const auto& fn : registry_.List()) names.push_back(fn->name);
  EXPECT_THAT(names, ElementsAre("add", "arange", "concat", "div", "echo",
                                 "fail", "mul", "ones", "sleep_ms", "sub",
                                 "sum", "worker_name", "zeros"));
}

TEST_F(BuiltinsTest, RegisteringTwiceIsAlreadyExists) {
  EXPECT_THAT(RegisterBuiltins(&registry_, &timers_),
              StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST_F(BuiltinsTest, Signatures) {
  EXPECT_EQ(registry_.Find("add")->signature,
            "add(a: value, b: value) -> value");
  EXPECT_EQ(registry_.Find("concat")->signature,
            "concat(tensors: list[tensor], axis: int?) -> tensor");
  EXPECT_EQ(registry_.Find("fail")->signature,
            "fail(message: string, code: string?) -> null");
}

// ---- echo ----

TEST_F(BuiltinsTest, EchoOneArgumentReturnsIt) {
  Tensor t = SampleTensor(DType::kInt32, {2, 2}, 1);
  ASSERT_OK_AND_ASSIGN(Value r, Call("echo", {t}));
  EXPECT_EQ(r, Value(t));
}

TEST_F(BuiltinsTest, EchoSeveralArgumentsReturnsList) {
  ASSERT_OK_AND_ASSIGN(Value r, Call("echo", {1, "two", nullptr}));
  EXPECT_EQ(r, Value(Value::List{1, "two", nullptr}));
}

TEST_F(BuiltinsTest, EchoNoArgumentsReturnsEmptyList) {
  ASSERT_OK_AND_ASSIGN(Value r, Call("echo", {}));
  EXPECT_EQ(r, Value(Value::List{}));
}

// ---- Arithmetic: dtype promotion ----

TEST_F(BuiltinsTest, Float32TensorPlusIntStaysFloat32) {
  Tensor t = CallTensor("add", {Tensor::FromVector<float>({1, 2.5}), 3});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(4, 5.5));
}

TEST_F(BuiltinsTest, ScalarOnTheLeft) {
  Tensor t = CallTensor("sub", {10, Tensor::FromVector<int32_t>({1, 2})});
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_THAT(t.ToVector<int32_t>(), ElementsAre(9, 8));
}

TEST_F(BuiltinsTest, Int32TensorPlusDoubleIsFloat32) {
  Tensor t = CallTensor("add", {Tensor::FromVector<int32_t>({1, 2}), 2.5});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(3.5, 4.5));
}

TEST_F(BuiltinsTest, BoolTensorPlusIntIsInt64) {
  Tensor t = CallTensor("add", {Tensor::FromVector<bool>({true, false}), 1});
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(2, 1));
}

TEST_F(BuiltinsTest, IntTensorDivIntTensorIsFloat32) {
  Tensor t = CallTensor("div", {Tensor::FromVector<int64_t>({1, 3}),
                                Tensor::FromVector<int64_t>({2, 2})});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(0.5, 1.5));
}

TEST_F(BuiltinsTest, Int8PlusUInt8IsInt16) {
  Tensor t = CallTensor("add", {Tensor::FromVector<int8_t>({-1, 100}),
                                Tensor::FromVector<uint8_t>({200, 100})});
  EXPECT_EQ(t.dtype(), DType::kInt16);
  EXPECT_THAT(t.ToVector<int16_t>(), ElementsAre(199, 200));
}

TEST_F(BuiltinsTest, Float16PlusBFloat16IsFloat32) {
  Tensor t = CallTensor(
      "mul", {Tensor::FromVector<Float16>({Float16(1.5f), Float16(2.0f)}),
              Tensor::FromVector<BFloat16>({BFloat16(2.0f), BFloat16(0.5f)})});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(3, 1));
}

TEST_F(BuiltinsTest, Complex64PlusFloat64IsComplex128) {
  Tensor t =
      CallTensor("add", {Tensor::FromVector<std::complex<float>>({{1, 2}}),
                         Tensor::FromVector<double>({0.5})});
  EXPECT_EQ(t.dtype(), DType::kComplex128);
  EXPECT_THAT(t.ToVector<std::complex<double>>(),
              ElementsAre(std::complex<double>(1.5, 2)));
}

TEST_F(BuiltinsTest, ScalarIntArithmeticStaysInt) {
  ASSERT_OK_AND_ASSIGN(Value sum, Call("add", {2, 3}));
  EXPECT_EQ(sum, Value(5));
  ASSERT_OK_AND_ASSIGN(Value product, Call("mul", {-4, 3}));
  EXPECT_EQ(product, Value(-12));
}

TEST_F(BuiltinsTest, ScalarIntDivisionIsDouble) {
  ASSERT_OK_AND_ASSIGN(Value r, Call("div", {2, 4}));
  EXPECT_EQ(r, Value(0.5));
}

TEST_F(BuiltinsTest, ScalarIntPlusDoubleIsDouble) {
  ASSERT_OK_AND_ASSIGN(Value r, Call("add", {1, 0.25}));
  EXPECT_EQ(r, Value(1.25));
}

TEST_F(BuiltinsTest, BoolTensorSubtractionRejected) {
  Tensor b = Tensor::FromVector<bool>({true, false});
  EXPECT_THAT(Call("sub", {b, b}), StatusIs(kInvalid, HasSubstr("bool")));
}

TEST_F(BuiltinsTest, ShapeMismatchNamesBothShapes) {
  EXPECT_THAT(
      Call("add", {SampleTensor(DType::kFloat32, {2, 3}),
                   SampleTensor(DType::kFloat32, {3, 2})}),
      StatusIs(kInvalid, AllOf(HasSubstr("[2, 3]"), HasSubstr("[3, 2]"))));
}

TEST_F(BuiltinsTest, ZeroDimTensorBroadcasts) {
  Tensor t = CallTensor(
      "mul", {Tensor::FromVector<float>({1, 2, 3}), Tensor::Scalar<float>(2)});
  EXPECT_EQ(t.shape(), Shape{3});
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(2, 4, 6));
  Tensor left = CallTensor("sub", {Tensor::Scalar<int64_t>(10),
                                   Tensor::FromVector<int64_t>({1, 2})});
  EXPECT_THAT(left.ToVector<int64_t>(), ElementsAre(9, 8));
}

TEST_F(BuiltinsTest, ZeroDimTensorDoesNotWidenWithinFamily) {
  Tensor t = CallTensor(
      "add", {Tensor::FromVector<float>({1, 2}), Tensor::Scalar<double>(0.5)});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  Tensor i = CallTensor(
      "add", {Tensor::FromVector<int32_t>({1, 2}), Tensor::Scalar<int64_t>(1)});
  EXPECT_EQ(i.dtype(), DType::kInt32);
}

TEST_F(BuiltinsTest, NonNumericOperandRejected) {
  EXPECT_THAT(Call("add", {Tensor::FromVector<float>({1}), "x"}),
              StatusIs(kInvalid, HasSubstr("string")));
  EXPECT_THAT(Call("mul", {Value::List{1}, 2}), StatusIs(kInvalid));
}

TEST_F(BuiltinsTest, ArithmeticArityError) {
  EXPECT_THAT(Call("add", {1}),
              StatusIs(kInvalid, HasSubstr("expected 2 arguments, got 1")));
}

// ---- sum ----

TEST_F(BuiltinsTest, SumOfTensorIsZeroDim) {
  Tensor t = CallTensor("sum", {Tensor::FromVector<float>({1.5, 2.5, 3})});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.rank(), 0);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(7));
}

TEST_F(BuiltinsTest, SumOfIntTensorsIsInt64) {
  Tensor t = CallTensor("sum", {Tensor::FromVector<int8_t>({100, 100, 100})});
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(300));
  Tensor b = CallTensor("sum", {Tensor::FromVector<bool>({true, false, true})});
  EXPECT_EQ(b.dtype(), DType::kInt64);
  EXPECT_THAT(b.ToVector<int64_t>(), ElementsAre(2));
}

TEST_F(BuiltinsTest, SumOfListIsElementwise) {
  ASSERT_OK_AND_ASSIGN(Value scalars,
                       Call("sum", {Value(Value::List{1, 2, 3})}));
  EXPECT_EQ(scalars, Value(6));
  Tensor t = CallTensor(
      "sum", {Value(Value::List{Tensor::FromVector<int32_t>({1, 2}),
                                Tensor::FromVector<int32_t>({10, 20}), 1})});
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_THAT(t.ToVector<int32_t>(), ElementsAre(12, 23));
}

TEST_F(BuiltinsTest, SumRejectsEmptyListAndBadItems) {
  EXPECT_THAT(Call("sum", {Value(Value::List{})}), StatusIs(kInvalid));
  EXPECT_THAT(Call("sum", {"x"}), StatusIs(kInvalid, HasSubstr("string")));
  EXPECT_THAT(Call("sum", {Value(Value::List{1, "x"})}),
              StatusIs(kInvalid, HasSubstr("args[0][1]")));
}

TEST_F(BuiltinsTest, SumOfSingleItemListChecksItem) {
  EXPECT_THAT(Call("sum", {Value(Value::List{"x"})}),
              StatusIs(kInvalid, HasSubstr("args[0][0]")));
}

// ---- ones / zeros ----

TEST_F(BuiltinsTest, OnesWithIntShapeDefaultsToFloat32) {
  Tensor t = CallTensor("ones", {3});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.shape(), Shape{3});
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(1, 1, 1));
}

TEST_F(BuiltinsTest, ZerosWithListShapeAndDtype) {
  Tensor t = CallTensor("zeros", {Value::List{2, 3}, "int32"});
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_THAT(t.ToVector<int32_t>(), ElementsAre(0, 0, 0, 0, 0, 0));
  Tensor empty = CallTensor("ones", {Value::List{2, 0}, "complex64"});
  EXPECT_EQ(empty.dtype(), DType::kComplex64);
  EXPECT_EQ(empty.numel(), 0);
}

TEST_F(BuiltinsTest, OnesBadArguments) {
  EXPECT_THAT(Call("ones", {2, "float99"}),
              StatusIs(kInvalid, HasSubstr("float99")));
  EXPECT_THAT(Call("ones", {"x"}), StatusIs(kInvalid, HasSubstr("args[0]")));
  EXPECT_THAT(Call("zeros", {Value(Value::List{2, 1.5})}),
              StatusIs(kInvalid, HasSubstr("args[0]")));
  EXPECT_THAT(Call("zeros", {-1}), StatusIs(kInvalid, HasSubstr("args[0]")));
}

// ---- arange ----

TEST_F(BuiltinsTest, ArangeEndOnly) {
  Tensor t = CallTensor("arange", {4});
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(0, 1, 2, 3));
}

TEST_F(BuiltinsTest, ArangeStartEnd) {
  Tensor t = CallTensor("arange", {2, 5});
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(2, 3, 4));
}

TEST_F(BuiltinsTest, ArangeFloatStepIsFloat32) {
  Tensor t = CallTensor("arange", {0, 1, 0.25});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(0, 0.25, 0.5, 0.75));
}

TEST_F(BuiltinsTest, ArangeNegativeStep) {
  Tensor t = CallTensor("arange", {3, 0, -1});
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(3, 2, 1));
}

TEST_F(BuiltinsTest, ArangeDtypeOverride) {
  Tensor t = CallTensor("arange", {3, "float64"});
  EXPECT_EQ(t.dtype(), DType::kFloat64);
  EXPECT_THAT(t.ToVector<double>(), ElementsAre(0, 1, 2));
}

TEST_F(BuiltinsTest, ArangeBadArguments) {
  EXPECT_THAT(Call("arange", {0, 5, 0}), StatusIs(kInvalid));
  EXPECT_THAT(Call("arange", {0, 5, -1}), StatusIs(kInvalid));
  EXPECT_THAT(Call("arange", {}), StatusIs(kInvalid));
  EXPECT_THAT(Call("arange", {"int64"}), StatusIs(kInvalid));
  EXPECT_THAT(Call("arange", {1, 2, 3, 4}), StatusIs(kInvalid));
  EXPECT_THAT(Call("arange", {3, "nope"}),
              StatusIs(kInvalid, HasSubstr("nope")));
  EXPECT_THAT(Call("arange", {0, true}),
              StatusIs(kInvalid, HasSubstr("args[1]")));
}

// ---- concat ----

TEST_F(BuiltinsTest, ConcatAxis0) {
  Tensor t = CallTensor("concat",
                        {Value(Value::List{Tensor::FromVector<int32_t>({1, 2}),
                                           Tensor::FromVector<int32_t>({3})})});
  EXPECT_EQ(t.shape(), Shape{3});
  EXPECT_THAT(t.ToVector<int32_t>(), ElementsAre(1, 2, 3));
}

TEST_F(BuiltinsTest, ConcatAxis1) {
  ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::FromVector<int64_t>({1, 2}, {2, 1}));
  ASSERT_OK_AND_ASSIGN(Tensor b,
                       Tensor::FromVector<int64_t>({3, 4, 5, 6}, {2, 2}));
  Tensor t = CallTensor("concat", {Value::List{a, b}, 1});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(1, 3, 4, 2, 5, 6));
}

TEST_F(BuiltinsTest, ConcatNegativeAxis) {
  ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::FromVector<int64_t>({1, 2}, {2, 1}));
  Tensor t = CallTensor("concat", {Value::List{a, a}, -1});
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_THAT(t.ToVector<int64_t>(), ElementsAre(1, 1, 2, 2));
}

TEST_F(BuiltinsTest, ConcatPromotesDtypes) {
  Tensor t = CallTensor("concat",
                        {Value(Value::List{Tensor::FromVector<int32_t>({1}),
                                           Tensor::FromVector<float>({2.5})})});
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.ToVector<float>(), ElementsAre(1, 2.5));
}

TEST_F(BuiltinsTest, ConcatMismatchedShapesNamesTensor) {
  EXPECT_THAT(Call("concat",
                   {Value(Value::List{SampleTensor(DType::kFloat32, {2, 2}),
                                      SampleTensor(DType::kFloat32, {2, 2}),
                                      SampleTensor(DType::kFloat32, {2, 3})})}),
              StatusIs(kInvalid, HasSubstr("tensors[2]")));
  EXPECT_THAT(Call("concat",
                   {Value(Value::List{SampleTensor(DType::kFloat32, {2}),
                                      SampleTensor(DType::kFloat32, {2, 1})})}),
              StatusIs(kInvalid, HasSubstr("tensors[1]")));
}

TEST_F(BuiltinsTest, ConcatRejectsZeroDimEmptyAndBadAxis) {
  EXPECT_THAT(Call("concat", {Value(Value::List{Tensor::Scalar<float>(1),
                                                Tensor::Scalar<float>(2)})}),
              StatusIs(kInvalid, HasSubstr("0-d")));
  EXPECT_THAT(Call("concat", {Value(Value::List{})}), StatusIs(kInvalid));
  EXPECT_THAT(Call("concat", {Value::List{Tensor::FromVector<float>({1})}, 1}),
              StatusIs(kInvalid, HasSubstr("axis")));
  EXPECT_THAT(Call("concat", {Value(Value::List{1})}),
              StatusIs(kInvalid, HasSubstr("args[0][0]")));
}

// ---- sleep_ms ----

// A timer on the worker's clock, not a blocked thread: it completes when
// that clock reaches its time, and not before.
TEST_F(BuiltinsTest, SleepCompletesWhenTheClockGetsThere) {
  Future<Value> f = Start("sleep_ms", {5000});
  timers_.Advance(absl::Milliseconds(4999));
  EXPECT_FALSE(f.IsReady());
  timers_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(f.IsReady());
  ASSERT_OK_AND_ASSIGN(Value r, f.Wait(absl::ZeroDuration()));
  EXPECT_TRUE(r.is_null());
}

TEST_F(BuiltinsTest, SleepNegativeRejected) {
  EXPECT_THAT(Call("sleep_ms", {-1}), StatusIs(kInvalid));
}

TEST_F(BuiltinsTest, SleepEndsByCallerDeadline) {
  ctx_.deadline = clock_.Now() + absl::Milliseconds(50);
  Future<Value> f = Start("sleep_ms", {10000});
  timers_.Advance(absl::Milliseconds(49));
  EXPECT_FALSE(f.IsReady());
  timers_.Advance(absl::Milliseconds(1));
  EXPECT_THAT(f.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(BuiltinsTest, CancelledSleepEndsAndDropsItsTimer) {
  ctx_.cancellation = std::make_shared<Cancellation>();
  Future<Value> f = Start("sleep_ms", {10000});
  EXPECT_TRUE(timers_.has_pending());
  ctx_.cancellation->Cancel(absl::CancelledError("the caller went away"));
  EXPECT_THAT(f.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kCancelled, "the caller went away"));
}

TEST_F(BuiltinsTest, SleepAfterTimersStopIsUnavailable) {
  timers_.Stop();
  EXPECT_THAT(Call("sleep_ms", {1}), StatusIs(absl::StatusCode::kUnavailable));
}

// ---- fail / worker_name ----

TEST_F(BuiltinsTest, FailDefaultsToUnknown) {
  EXPECT_THAT(Call("fail", {"it broke"}),
              StatusIs(absl::StatusCode::kUnknown, "it broke"));
}

TEST_F(BuiltinsTest, FailWithCode) {
  EXPECT_THAT(Call("fail", {"gone", "NOT_FOUND"}),
              StatusIs(absl::StatusCode::kNotFound, "gone"));
  // OK cannot make fail succeed.
  EXPECT_THAT(Call("fail", {"no", "OK"}),
              StatusIs(absl::StatusCode::kUnknown, "no"));
}

TEST_F(BuiltinsTest, FailUnknownCodeName) {
  EXPECT_THAT(
      Call("fail", {"x", "NOPE"}),
      StatusIs(kInvalid, AllOf(HasSubstr("args[1]"), HasSubstr("NOPE"))));
}

TEST_F(BuiltinsTest, WorkerNameFromContext) {
  ctx_.worker = "worker7";
  ASSERT_OK_AND_ASSIGN(Value r, Call("worker_name", {}));
  EXPECT_EQ(r, Value("worker7"));
}

// ---- Cast ----

TEST(CastTest, FloatNaNToIntIsZero) {
  Tensor t = Cast(Tensor::FromVector<float>({NAN, 2.9f, -2.9f}), DType::kInt32);
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_THAT(t.ToVector<int32_t>(), ElementsAre(0, 2, -2));
}

TEST(CastTest, FloatToIntSaturates) {
  Tensor t = Cast(
      Tensor::FromVector<double>({1e10, -1e10, INFINITY, -INFINITY, 300, -5}),
      DType::kInt8);
  EXPECT_THAT(t.ToVector<int8_t>(), ElementsAre(127, -128, 127, -128, 127, -5));
  Tensor u = Cast(Tensor::FromVector<float>({-1, 256}), DType::kUInt8);
  EXPECT_THAT(u.ToVector<uint8_t>(), ElementsAre(0, 255));
  Tensor big = Cast(Tensor::FromVector<double>({1e30}), DType::kInt64);
  EXPECT_THAT(big.ToVector<int64_t>(),
              ElementsAre(std::numeric_limits<int64_t>::max()));
}

TEST(CastTest, ComplexToRealKeepsRealPart) {
  Tensor c = Tensor::FromVector<std::complex<float>>({{1.5, 2}, {-3, 4}});
  EXPECT_THAT(Cast(c, DType::kFloat64).ToVector<double>(),
              ElementsAre(1.5, -3));
  EXPECT_THAT(Cast(c, DType::kInt32).ToVector<int32_t>(), ElementsAre(1, -3));
}

TEST(CastTest, AnythingToBoolIsNonZero) {
  EXPECT_THAT(
      Cast(Tensor::FromVector<float>({0, -0.0f, 0.5, NAN}), DType::kBool)
          .ToVector<bool>(),
      ElementsAre(false, false, true, true));
  EXPECT_THAT(
      Cast(Tensor::FromVector<int64_t>({0, 7}), DType::kBool).ToVector<bool>(),
      ElementsAre(false, true));
  EXPECT_THAT(Cast(Tensor::FromVector<std::complex<double>>({{0, 0}, {0, 1}}),
                   DType::kBool)
                  .ToVector<bool>(),
              ElementsAre(false, true));
}

TEST(CastTest, SameDtypeSharesBytes) {
  Tensor t = Tensor::FromVector<float>({1, 2});
  EXPECT_EQ(Cast(t, DType::kFloat32).data(), t.data());
}

TEST(CastTest, RealToComplexHasZeroImaginary) {
  Tensor t = Cast(Tensor::FromVector<int32_t>({3}), DType::kComplex64);
  EXPECT_THAT(t.ToVector<std::complex<float>>(),
              ElementsAre(std::complex<float>(3, 0)));
}

// ---- Hostile sizes: checked before anything is allocated ----

constexpr auto kExhausted = absl::StatusCode::kResourceExhausted;

TEST_F(BuiltinsTest, ZerosOverTheAllocationLimitNamesTheFlag) {
  // 2^34 float32 = 64 GiB (it used to try, and die of bad_alloc).
  EXPECT_THAT(Call("zeros", {Value(Value::List{int64_t{17179869184}})}),
              StatusIs(kExhausted, AllOf(HasSubstr("64 GiB would be allocated"),
                                         HasSubstr("over the limit of 2 GiB "
                                                   "(--max_alloc_mb=2048)"))));
  EXPECT_THAT(Call("ones", {Value::List{int64_t{1} << 30}, "complex128"}),
              StatusIs(kExhausted, HasSubstr("--max_alloc_mb=2048")));
}

TEST_F(BuiltinsTest, ShapesOverTheDimensionLimitAreInvalid) {
  EXPECT_THAT(
      Call("zeros", {Value(Value::List{int64_t{1} << 62, 0})}),
      StatusIs(kInvalid, AllOf(HasSubstr("args[0]: shape[0]: dimension "
                                         "4611686018427387904"),
                               HasSubstr("--max_tensor_dim=1099511627776"))));
  Value::List rank40(40, Value(1));
  EXPECT_THAT(Call("ones", {Value(rank40)}),
              StatusIs(kInvalid, HasSubstr("rank 40 is over the limit of 32 "
                                           "(--max_tensor_rank=32)")));
}

TEST_F(BuiltinsTest, TheCallsLimitsApply) {
  Limits small;
  small.max_alloc_bytes = Limits::kMiB;
  ctx_.limits = &small;
  EXPECT_THAT(Call("zeros", {Value(Value::List{int64_t{1} << 19})}),
              StatusIs(kExhausted, AllOf(HasSubstr("2 MiB would be allocated"),
                                         HasSubstr("(--max_alloc_mb=1)"))));
  // Temporaries count: int32 [200000] + 2.5 casts to float32 (800 KB) and
  // makes a float32 result (800 KB).
  Tensor ints = Tensor::FromVector(std::vector<int32_t>(200000, 1));
  EXPECT_THAT(Call("add", {ints, 2.5}),
              StatusIs(kExhausted, HasSubstr("--max_alloc_mb=1")));
  EXPECT_OK(Call("add", {ints, 2}));  // int32 + int: 800 KB result only.
  EXPECT_THAT(Call("arange", {0, 300000}),
              StatusIs(kExhausted, HasSubstr("--max_alloc_mb=1")));
  EXPECT_THAT(Call("concat", {Value(Value::List{ints, ints})}),
              StatusIs(kExhausted, HasSubstr("--max_alloc_mb=1")));
  EXPECT_THAT(Call("sum", {Value(Value::List{ints, 2.5})}),
              StatusIs(kExhausted, HasSubstr("--max_alloc_mb=1")));
}

TEST_F(BuiltinsTest, ArangeCountIsBoundedBeforeConversion) {
  EXPECT_THAT(Call("arange", {0.0, 1e15}),
              StatusIs(kInvalid, HasSubstr("--max_tensor_dim")));
  // end - start overflows to infinity.
  EXPECT_THAT(Call("arange", {-1.7e308, 1.7e308}),
              StatusIs(kInvalid, HasSubstr("--max_tensor_dim")));
  EXPECT_THAT(Call("arange", {0, int64_t{1} << 36}),
              StatusIs(kExhausted, HasSubstr("512 GiB would be allocated")));
}

TEST_F(BuiltinsTest, ConcatOfAHugeEmptyShapeAnswersAtOnce) {
  // [2^62, 0] int8 is a valid Tensor (its extent fits int64) but over the
  // default --max_tensor_dim; concat along axis 1 used to loop 2^62 times
  // (all_gather with an axis reaches the same Concat).
  Tensor empty = *Tensor::FromBytes(DType::kInt8, {int64_t{1} << 62, 0}, "");
  EXPECT_THAT(Call("concat", {Value::List{empty, empty}, 1}),
              StatusIs(kInvalid, HasSubstr("--max_tensor_dim")));
  // With no dimension limit at all, the empty result comes back at once.
  Limits unbounded;
  unbounded.max_tensor_dim = std::numeric_limits<int64_t>::max();
  ctx_.limits = &unbounded;
  Tensor t = CallTensor("concat", {Value::List{empty, empty}, 1});
  EXPECT_EQ(t.shape(), (Shape{int64_t{1} << 62, 0}));
  EXPECT_EQ(t.nbytes(), 0u);
}

TEST_F(BuiltinsTest, ConcatAxisOverflowIsInvalid) {
  Limits unbounded;
  unbounded.max_tensor_dim = std::numeric_limits<int64_t>::max();
  ctx_.limits = &unbounded;
  Tensor half = *Tensor::FromBytes(DType::kInt8, {0, int64_t{1} << 62}, "");
  EXPECT_THAT(Call("concat", {Value::List{half, half, half, half}, 1}),
              StatusIs(kInvalid, HasSubstr("overflows int64")));
}

}  // namespace
}  // namespace ferry
