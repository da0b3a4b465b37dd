// Unit tests of the diff an `expect` failure shows
// (tools/ferryctl/value_diff.h): the path of the first difference, then
// what was got and what was expected.
#include "tools/ferryctl/value_diff.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace ctl {
namespace {

using ::testing::Optional;

Value V(const std::string& json) {
  absl::StatusOr<Value> v = ParseJson(json);
  EXPECT_OK(v);
  return v.ok() ? *std::move(v) : Value();
}

std::optional<std::string> Diff(const std::string& got,
                                const std::string& want) {
  return FirstDifference(V(got), V(want));
}

TEST(ValueDiffTest, EqualValuesHaveNoDifference) {
  EXPECT_EQ(Diff("null", "null"), std::nullopt);
  EXPECT_EQ(
      Diff(R"({"a":[1,2.5,"x",true,null]})", R"({"a":[1,2.5,"x",true,null]})"),
      std::nullopt);
  EXPECT_EQ(Diff(R"({"ranks":[{"dtype":"complex64","shape":[1,2],
                               "data":[[1,2],[3,4]]}, null]})",
                 R"({"ranks":[{"dtype":"complex64","shape":[1,2],
                               "data":[[1,2],[3,4]]}, null]})"),
            std::nullopt);
}

TEST(ValueDiffTest, KindMismatch) {
  EXPECT_THAT(
      Diff("1", R"("a")"),
      Optional(std::string(R"(value: got int 1, expected string "a")")));
  EXPECT_THAT(Diff("1", "1.0"),
              Optional(std::string("value: got int 1, expected double 1.0")));
  EXPECT_THAT(
      Diff(R"({"ranks":[null]})",
           R"({"ranks":[{"dtype":"int64","data":[1]}]})"),
      Optional(std::string(
          R"(ranks[0]: got null null, expected tensor {"dtype":"int64","data":[1]})")));
}

TEST(ValueDiffTest, LongValuesAreCut) {
  std::string got = "[";
  for (int i = 0; i < 100; ++i) got += (i ? "," : "") + std::to_string(i);
  got += "]";
  std::optional<std::string> d = Diff(got, "{}");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d,
            "value: got list " + got.substr(0, 77) + "..., expected map {}");
}

TEST(ValueDiffTest, DtypeMismatch) {
  EXPECT_THAT(Diff(R"({"x":{"dtype":"int32","data":[1]}})",
                   R"({"x":{"dtype":"int64","data":[1]}})"),
              Optional(std::string("x.dtype: got int32, expected int64")));
  EXPECT_THAT(
      Diff(R"({"dtype":"float32","data":[1]})",
           R"({"dtype":"float64","data":[1]})"),
      Optional(std::string("value.dtype: got float32, expected float64")));
}

TEST(ValueDiffTest, ShapeMismatch) {
  EXPECT_THAT(Diff(R"({"dtype":"int64","shape":[2,1],"data":[1,2]})",
                   R"({"dtype":"int64","data":[1,2]})"),
              Optional(std::string("value.shape: got [2, 1], expected [2]")));
  EXPECT_THAT(Diff(R"([{"dtype":"int64","data":[1,2,3]}])",
                   R"([{"dtype":"int64","data":[1,2]}])"),
              Optional(std::string("[0].shape: got [3], expected [2]")));
}

TEST(ValueDiffTest, ElementMismatchNamesTheElementAndShowsBothTensors) {
  EXPECT_THAT(
      Diff(R"({"ranks":[{"dtype":"int64","data":[1,2]},
                        {"dtype":"int64","data":[20,21,22,23,24,25,26,27,31]}]})",
           R"({"ranks":[{"dtype":"int64","data":[1,2]},
                        {"dtype":"int64","data":[20,21,22,23,24,25,26,27,32]}]})"),
      Optional(std::string("ranks[1].data[8]: got 31, expected 32\n"
                           "      got:      [20,21,22,23,24,25,26,27,31]\n"
                           "      expected: [20,21,22,23,24,25,26,27,32]")));
}

TEST(ValueDiffTest, ElementMismatchInATwoDimensionalTensorIsFlat) {
  EXPECT_THAT(Diff(R"({"dtype":"int64","shape":[2,2],"data":[1,2,3,4]})",
                   R"({"dtype":"int64","shape":[2,2],"data":[1,2,3,5]})"),
              Optional(std::string("value.data[3]: got 4, expected 5\n"
                                   "      got:      [1,2,3,4]\n"
                                   "      expected: [1,2,3,5]")));
}

TEST(ValueDiffTest, ElementMismatchOfOtherDtypes) {
  EXPECT_THAT(Diff(R"({"dtype":"complex64","data":[[1,1],[2,2]]})",
                   R"({"dtype":"complex64","data":[[1,1],[2,3]]})"),
              Optional(std::string("value.data[1]: got [2,2], expected [2,3]\n"
                                   "      got:      [[1,1],[2,2]]\n"
                                   "      expected: [[1,1],[2,3]]")));
  EXPECT_THAT(Diff(R"({"dtype":"float32","data":[1.5]})",
                   R"({"dtype":"float32","data":[2.5]})"),
              Optional(std::string("value.data[0]: got 1.5, expected 2.5\n"
                                   "      got:      [1.5]\n"
                                   "      expected: [2.5]")));
  EXPECT_THAT(Diff(R"({"dtype":"bool","data":[true]})",
                   R"({"dtype":"bool","data":[false]})"),
              Optional(std::string("value.data[0]: got true, expected false\n"
                                   "      got:      [true]\n"
                                   "      expected: [false]")));
}

TEST(ValueDiffTest, LongTensorsAreCutInTheContextLines) {
  std::string data = "[";
  for (int i = 0; i < 100; ++i) data += (i ? "," : "") + std::to_string(i);
  std::string want_data = data + ",0]";
  data += ",1]";
  std::optional<std::string> d =
      Diff(R"({"dtype":"int64","data":)" + data + "}",
           R"({"dtype":"int64","data":)" + want_data + "}");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d,
            "value.data[100]: got 1, expected 0\n"
            "      got:      " +
                data.substr(0, 77) +
                "...\n"
                "      expected: " +
                want_data.substr(0, 77) + "...");
}

TEST(ValueDiffTest, MissingMapKey) {
  EXPECT_THAT(Diff(R"({"a":1})", R"({"a":1,"b":2})"),
              Optional(std::string(R"(value: missing key "b")")));
  EXPECT_THAT(Diff(R"({"ranks":[{"a":1}]})", R"({"ranks":[{"a":1,"b":2}]})"),
              Optional(std::string(R"(ranks[0]: missing key "b")")));
}

TEST(ValueDiffTest, UnexpectedMapKey) {
  EXPECT_THAT(Diff(R"({"a":1,"b":2})", R"({"a":1})"),
              Optional(std::string(R"(value: unexpected key "b")")));
}

TEST(ValueDiffTest, ListLengthMismatch) {
  EXPECT_THAT(Diff("[1,2]", "[1,2,3]"),
              Optional(std::string("value: got 2 items, expected 3")));
  EXPECT_THAT(Diff(R"({"ranks":[1,2,3]})", R"({"ranks":[1,2]})"),
              Optional(std::string("ranks: got 3 items, expected 2")));
}

TEST(ValueDiffTest, FirstDifferenceDepthFirst) {
  // The element before the length mismatch is reported first.
  EXPECT_THAT(Diff("[1,5]", "[1,2,3]"),
              Optional(std::string("[1]: got 5, expected 2")));
  EXPECT_THAT(Diff(R"({"x":[1,{"y":2}],"z":0})", R"({"x":[1,{"y":3}],"z":1})"),
              Optional(std::string("x[1].y: got 2, expected 3")));
}

TEST(ValueDiffTest, ScalarMismatch) {
  EXPECT_THAT(Diff(R"("abc")", R"("abd")"),
              Optional(std::string(R"(value: got "abc", expected "abd")")));
  EXPECT_THAT(Diff("true", "false"),
              Optional(std::string("value: got true, expected false")));
  EXPECT_THAT(Diff(R"({"a":2.5})", R"({"a":3.5})"),
              Optional(std::string("a: got 2.5, expected 3.5")));
}

TEST(ValueDiffTest, LargeTensorsAreQuotedBriefly) {
  std::vector<int64_t> a(1 << 20, 7), b = a;
  b.back() = 8;
  std::optional<std::string> d = FirstDifference(Value(Tensor::FromVector(a)),
                                                 Value(Tensor::FromVector(b)));
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(*d, ::testing::StartsWith(
                      "value.data[1048575]: got 7, expected 8\n      got:"));
  EXPECT_LT(d->size(), 300u);
}

}  // namespace
}  // namespace ctl
}  // namespace ferry
