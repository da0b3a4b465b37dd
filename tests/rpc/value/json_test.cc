#include "rpc/value/json.h"

#include <cmath>
#include <complex>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rpc/base/limits.h"
#include "rpc/value/json_parse.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/value_proto.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensor_samples.h"

namespace ferry {
namespace {

using ::ferry::testing::SampleTensor;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

Value Parse(absl::string_view text) {
  absl::StatusOr<Value> v = ParseJson(text);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : Value();
}

class JsonEveryDTypeTest : public ::testing::TestWithParam<DType> {};

// Value -> JSON -> Value -> proto -> Value is the identity.
TEST_P(JsonEveryDTypeTest, TensorsRoundTripThroughJsonAndProto) {
  for (const Shape& shape :
       {Shape{4}, Shape{2, 3}, Shape{}, Shape{0}, Shape{2, 0, 3}}) {
    Value v(SampleTensor(GetParam(), shape, 3));
    ASSERT_OK_AND_ASSIGN(Value back, ParseJson(ToJson(v)));
    EXPECT_EQ(back, v) << ToJson(v);
    proto::Value p;
    ASSERT_OK(ValueToProto(back, &p));
    ASSERT_OK_AND_ASSIGN(Value again, ValueFromProto(&p, "value"));
    EXPECT_EQ(again, v);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, JsonEveryDTypeTest,
                         ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(JsonTest, TensorForms) {
  ASSERT_OK_AND_ASSIGN(Tensor m,
                       Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(ToJson(Value(m)),
            R"({"dtype":"float32","shape":[2,2],"data":[1,2,3,4]})");
  EXPECT_EQ(ToJson(Value(Tensor::FromVector<int64_t>({1, 2}))),
            R"({"dtype":"int64","data":[1,2]})");
  EXPECT_EQ(ToJson(Value(Tensor::Scalar<int32_t>(5))),
            R"({"dtype":"int32","shape":[],"data":[5]})");
  EXPECT_EQ(ToJson(Value(Tensor::FromVector<bool>({true, false}))),
            R"({"dtype":"bool","data":[true,false]})");
  EXPECT_EQ(ToJson(Value(
                Tensor::FromVector<std::complex<float>>({{1, 1}, {2.5, -2}}))),
            R"({"dtype":"complex64","data":[[1,1],[2.5,-2]]})");
  EXPECT_EQ(ToJson(Value(Tensor::FromVector<Float16>({Float16(0.1f)}))),
            R"({"dtype":"float16","data":[0.1]})");
  EXPECT_EQ(
      ToJson(Value(Tensor::FromVector<float>({NAN, INFINITY, -INFINITY}))),
      R"({"dtype":"float32","data":["NaN","Infinity","-Infinity"]})");
}

TEST(JsonTest, ScalarsAndSpecialObjects) {
  EXPECT_EQ(ToJson(Value(4.0)), "4.0");
  EXPECT_EQ(ToJson(Value(0.1)), "0.1");
  EXPECT_EQ(ToJson(Value(1e300)), "1e+300");
  EXPECT_EQ(ToJson(Value(int64_t{-3})), "-3");
  EXPECT_EQ(ToJson(Value("a\"b\n\x01")), R"("a\"b\n\u0001")");
  EXPECT_EQ(ToJson(Value(Bytes{"hi"})), R"({"$bytes":"aGk="})");
  EXPECT_EQ(ToJson(Value(std::nan(""))), R"({"$double":"NaN"})");
  RRefDescriptor d{{0, 3}, {2, 1}, "worker1", 1};
  EXPECT_EQ(ToJson(Value(std::make_shared<const RRefBase>(d))),
            R"({"$rref":"w0.3","owner":"worker1"})");
  EXPECT_EQ(ToJson(Value(Value::Map{{"b", 1}, {"a", Value::List{}}})),
            R"({"a":[],"b":1})");
}

TEST(JsonTest, ScalarsRoundTrip) {
  for (const Value& v :
       {Value(), Value(true), Value(int64_t{1} << 62), Value(-2.5), Value(4.0),
        Value(1e-300), Value("snow ☃ and \t tab"), Value(Bytes{"\x00\x01"}),
        Value(HUGE_VAL)}) {
    ASSERT_OK_AND_ASSIGN(Value back, ParseJson(ToJson(v)));
    EXPECT_EQ(back, v) << ToJson(v);
  }
  ASSERT_OK_AND_ASSIGN(Value nan, ParseJson(ToJson(Value(std::nan("")))));
  EXPECT_TRUE(std::isnan(nan.as_double()));
}

TEST(JsonTest, NumbersAreIntOrDouble) {
  EXPECT_TRUE(Parse("12").is_int());
  EXPECT_TRUE(Parse("-0").is_int());
  EXPECT_TRUE(Parse("1.0").is_double());
  EXPECT_TRUE(Parse("1e2").is_double());
  EXPECT_TRUE(Parse("99999999999999999999").is_double());  // Beyond int64.
  EXPECT_EQ(Parse(" [1, 2.5, \"x\", null, true] "),
            Value(Value::List{1, 2.5, "x", Value(), true}));
  EXPECT_EQ(Parse(R"("\u00e9\ud83d\ude00")").as_string(), "é😀");
}

TEST(JsonTest, NestedAndShapedTensorData) {
  Tensor expected = *Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(Parse(R"({"dtype":"int32","data":[[1,2,3],[4,5,6]]})"),
            Value(expected));
  EXPECT_EQ(Parse(R"({"dtype":"int32","shape":[2,3],"data":[1,2,3,4,5,6]})"),
            Value(expected));
  EXPECT_EQ(Parse(R"({"data":[[1,2,3],[4,5,6]],"shape":[2,3],"dtype":"int"})"),
            Value(expected));
  EXPECT_EQ(Parse(R"({"dtype":"float64","data":7})"),
            Value(Tensor::Scalar<double>(7)));
  EXPECT_EQ(Parse(R"({"dtype":"float64","shape":[],"data":[7]})"),
            Value(Tensor::Scalar<double>(7)));
  EXPECT_EQ(Parse(R"({"dtype":"int8","data":[[],[]]})").as_tensor().shape(),
            Shape({2, 0}));
  EXPECT_EQ(Parse(R"({"dtype":"complex128","data":[[1,2],3]})"),
            Value(Tensor::FromVector<std::complex<double>>({{1, 2}, {3, 0}})));
  EXPECT_EQ(Parse(R"({"dtype":"complex64","data":[[[1,2],[3,4]]]})")
                .as_tensor()
                .shape(),
            Shape({1, 2}));
}

TEST(JsonTest, VariablesAreSubstituted) {
  JsonParseOptions options;
  options.resolve_variable =
      [](absl::string_view name) -> absl::StatusOr<Value> {
    if (name == "X") return Value(Tensor::FromVector<float>({1, 2}));
    if (name == "N") return Value(3);
    return absl::NotFoundError("no such variable");
  };
  ASSERT_OK_AND_ASSIGN(Value v, ParseJson(R"([$X, {"k": $N}])", options));
  EXPECT_EQ(v, Value(Value::List{Tensor::FromVector<float>({1, 2}),
                                 Value::Map{{"k", 3}}}));
  ASSERT_OK_AND_ASSIGN(
      Value t, ParseJson(R"({"dtype":"int64","data":[$N, 4]})", options));
  EXPECT_EQ(t, Value(Tensor::FromVector<int64_t>({3, 4})));
  EXPECT_THAT(
      ParseJson("[1, $Y]", options),
      StatusIs(kInvalid, HasSubstr("line 1, column 5: no such variable")));
  EXPECT_THAT(ParseJson("[$X]"),
              StatusIs(kInvalid, HasSubstr("unexpected variable $X")));
}

struct BadJson {
  const char* text;
  const char* message;
};

class JsonErrorTest : public ::testing::TestWithParam<BadJson> {};

TEST_P(JsonErrorTest, InvalidArgumentWithPosition) {
  EXPECT_THAT(ParseJson(GetParam().text),
              StatusIs(kInvalid, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, JsonErrorTest,
    ::testing::Values(BadJson{"", "line 1, column 1: unexpected end of input"},
                      BadJson{"[1, 2", "line 1, column 6: expected ',' or ']'"},
                      BadJson{"[1,\n  2 3]",
                              "line 2, column 5: expected ',' or ']'"},
                      BadJson{"{\"a\" 1}", "expected ':'"},
                      BadJson{"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
                      BadJson{"\"abc", "unterminated string"},
                      BadJson{"[1] x", "unexpected text after the value"},
                      BadJson{"01", "unexpected text after the value"},
                      BadJson{"1.", "digit expected after '.'"},
                      BadJson{"tru", "unexpected character 't'"},
                      BadJson{"\"\\q\"", "invalid escape"},
                      BadJson{"\"\\ud800\"", "unpaired surrogate"},
                      BadJson{"{\"$bytes\":\"!!\"}", "one base64 string"}));

INSTANTIATE_TEST_SUITE_P(
    BadTensors, JsonErrorTest,
    ::testing::Values(
        BadJson{
            R"({"dtype":"float32","data":[1],"extra":1})",
            "line 1, column 39: tensor object has unexpected key \"extra\""},
        BadJson{R"({"dtype":"float32","shape":[1]})", "lacks \"data\""},
        BadJson{R"({"dtype":"float33","data":[1]})",
                "column 10: unknown dtype 'float33'"},
        BadJson{R"({"dtype":7,"data":[1]})", "dtype must be a string"},
        BadJson{R"({"dtype":"int32","data":[[1,2],[3]]})",
                "column 32: ragged tensor data: a list of length 1 where "
                "dimension 1 has length 2"},
        BadJson{R"({"dtype":"int32","data":[[1,2],3]})",
                "ragged tensor data: an element where a list belongs"},
        BadJson{R"({"dtype":"int32","data":[1,[2]]})",
                "ragged tensor data: a list where an element belongs"},
        BadJson{R"({"dtype":"int32","shape":[2,2],"data":[1,2,3]})",
                "data holds [3] elements but shape is [2, 2]"},
        BadJson{R"({"dtype":"int32","shape":[-1],"data":[]})",
                "shape[0] must be a non-negative integer"},
        BadJson{R"({"dtype":"uint8","data":[256]})",
                "256 is out of range for uint8"},
        BadJson{R"({"dtype":"int64","data":[1.5]})",
                "expected an integer for int64, got 1.5"},
        BadJson{R"({"dtype":"bool","data":[1]})", "expected true or false"},
        BadJson{R"({"dtype":"float32","data":["x"]})",
                "expected a number, got \"x\""}));

TEST(JsonTest, NestingLimit) {
  std::string ok(kMaxValueDepth, '['), ok_close(kMaxValueDepth, ']');
  EXPECT_OK(ParseJson(ok + ok_close));
  std::string deep(kMaxValueDepth + 1, '['),
      deep_close(kMaxValueDepth + 1, ']');
  EXPECT_THAT(ParseJson(deep + deep_close),
              StatusIs(kInvalid, HasSubstr("nesting deeper than 64")));
  // Far deeper text fails fast without exhausting the stack.
  std::string huge(100000, '[');
  EXPECT_THAT(ParseJson(huge),
              StatusIs(kInvalid, HasSubstr("nesting too deep")));
}

// ---- Hostile input ----

constexpr auto kExhausted = absl::StatusCode::kResourceExhausted;

TEST(JsonTest, NumbersRoundToNearestIeee) {
  // Underflow is zero (or a subnormal), never infinity.
  EXPECT_EQ(ToJson(Parse("1e-400")), "0.0");
  const Value negative_zero = Parse("-1e-400");
  EXPECT_EQ(negative_zero.as_double(), 0.0);
  EXPECT_TRUE(std::signbit(negative_zero.as_double()));
  EXPECT_EQ(Parse("4e-320").as_double(), 4e-320);  // Subnormal.
  EXPECT_EQ(Parse("2.4703282292062328e-324").as_double(),
            std::numeric_limits<double>::denorm_min());
  // Overflow is infinity, and only then does JSON print {"$double":…}.
  EXPECT_EQ(ToJson(Parse("1e400")), R"({"$double":"Infinity"})");
  EXPECT_EQ(ToJson(Parse("-1e400")), R"({"$double":"-Infinity"})");
  EXPECT_EQ(Parse("1.7976931348623157e308").as_double(),
            std::numeric_limits<double>::max());
  // In tensor data too.
  EXPECT_EQ(ToJson(Parse(R"({"dtype":"float64","data":[1e-400,1e400]})")),
            R"({"dtype":"float64","data":[0,"Infinity"]})");
}

TEST(JsonTest, NegativeZeroElementsRoundTrip) {
  // Written as "-0" (an integer token); read back as -0.0, not int 0.
  // Found by json_fuzz (corpus: crash-negative-zero).
  for (DType dtype :
       {DType::kFloat32, DType::kFloat64, DType::kComplex64, DType::kFloat16}) {
    const std::string json = absl::StrCat(R"({"dtype":")", DTypeName(dtype),
                                          R"(","data":[-0.0,1e-40]})");
    const Value v = Parse(json);
    EXPECT_EQ(ToJson(Parse(ToJson(v))), ToJson(v)) << json;
    EXPECT_NE(ToJson(v).find("-0"), std::string::npos) << ToJson(v);
  }
}

TEST(JsonTest, ManyKeysAndADuplicateAtTheEnd) {
  // The duplicate check is a hash set per object, not a scan per key.
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) absl::StrAppend(&text, "\"k", i, "\":1,");
  ASSERT_OK_AND_ASSIGN(Value v, ParseJson(text + "\"end\":2}"));
  EXPECT_EQ(v.as_map().size(), 200001u);
  EXPECT_THAT(ParseJson(text + "\"k7\":2}"),
              StatusIs(kInvalid, HasSubstr("duplicate key \"k7\"")));
}

// A value nested `depth` deep: [[…[1]…]].
Value Nested(int depth) {
  Value v(1);
  for (int i = 0; i < depth; ++i) v = Value(Value::List{v});
  return v;
}

TEST(JsonTest, NestingLimitHoldsThroughSubstitution) {
  JsonParseOptions options;
  options.resolve_variable = [](absl::string_view) -> absl::StatusOr<Value> {
    return Nested(60);
  };
  ASSERT_OK_AND_ASSIGN(Value ok, ParseJson("[[[[$Z]]]]", options));
  EXPECT_EQ(ValueDepth(ok), 64);
  EXPECT_THAT(ParseJson("[[[[[$Z]]]]]", options),
              StatusIs(kInvalid, AllOf(HasSubstr("line 1, column 6"),
                                       HasSubstr("nesting deeper than 64"))));
  EXPECT_THAT(ParseJson(R"({"a":[[[[$Z]]]]})", options),
              StatusIs(kInvalid, HasSubstr("nesting deeper than 64")));
}

TEST(JsonTest, ItemsAreCountedSubstitutedOnesIncluded) {
  Limits limits;
  limits.max_items = 100;
  JsonParseOptions options;
  options.limits = &limits;
  options.resolve_variable = [](absl::string_view) -> absl::StatusOr<Value> {
    return Value(Value::List(60, Value(1)));
  };
  EXPECT_OK(ParseJson("[$W]", options));
  EXPECT_THAT(ParseJson("[$W, $W]", options),
              StatusIs(kExhausted, AllOf(HasSubstr("more than 100 values"),
                                         HasSubstr("(--max_items=100)"))));
  std::string wide = "[0";
  for (int i = 0; i < 100; ++i) wide += ",0";
  EXPECT_THAT(ParseJson(wide + "]", options),
              StatusIs(kExhausted, HasSubstr("--max_items=100")));
}

TEST(JsonTest, StringsAreBounded) {
  Limits limits;
  limits.max_string_bytes = 8;
  JsonParseOptions options;
  options.limits = &limits;
  EXPECT_OK(ParseJson(R"("12345678")", options));
  EXPECT_THAT(
      ParseJson(R"(["123456789"])", options),
      StatusIs(kExhausted, AllOf(HasSubstr("line 1, column 2: a string of 9 B"),
                                 HasSubstr("(--max_string_mb=0)"))));
  EXPECT_THAT(ParseJson(R"({"$bytes":"MTIzNDU2Nzg5"})", options),
              StatusIs(kExhausted, HasSubstr("--max_string_mb")));
}

TEST(JsonTest, TensorShapesKeepWithinTheLimits) {
  // The issue's concat argument: one dim 0, the other 2^62.
  EXPECT_THAT(
      ParseJson(
          R"({"dtype":"float32","shape":[4611686018427387904,0],"data":[]})"),
      StatusIs(kInvalid,
               AllOf(HasSubstr("shape[0]: dimension 4611686018427387904 is "
                               "over the limit of 1099511627776"),
                     HasSubstr("(--max_tensor_dim=1099511627776)"))));
  // Each dim under the limit, but their extent over it.
  EXPECT_THAT(
      ParseJson(R"({"dtype":"int8","shape":[1048576,0,2097152],"data":[]})"),
      StatusIs(kInvalid, AllOf(HasSubstr("zero dimensions counted as 1"),
                               HasSubstr("--max_tensor_dim"))));
  EXPECT_OK(ParseJson(R"({"dtype":"int8","shape":[1048576,0],"data":[]})"));
  std::string rank33 = R"({"dtype":"int8","shape":[)";
  for (int i = 0; i < 33; ++i) rank33 += i ? ",1" : "1";
  EXPECT_THAT(ParseJson(rank33 + R"(],"data":[5]})"),
              StatusIs(kInvalid, HasSubstr("(--max_tensor_rank=32)")));
}

}  // namespace
}  // namespace ferry
