// Unit tests of ferryctl's human-readable rendering (tools/ferryctl/pretty.h),
// used by the script `show` statement: tensors as torch prints them,
// per-rank lines, KJTs as TorchRec's tables, maps and lists as Python's.
#include "tools/ferryctl/pretty.h"

#include <algorithm>
#include <cstdint>
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

using ::testing::HasSubstr;

// Pretty() of the value written as JSON.
std::string Show(const std::string& json) {
  absl::StatusOr<Value> v = ParseJson(json);
  EXPECT_OK(v);
  return v.ok() ? Pretty(*v) : "";
}

TEST(PrettyTest, Int64AndFloat32TensorsHaveNoDtype) {
  EXPECT_EQ(Show(R"({"dtype":"int64","data":[0,4,8]})"),
            "  tensor([0, 4, 8])\n");
  EXPECT_EQ(Show(R"({"dtype":"float32","data":[6,2.5,-1]})"),
            "  tensor([6., 2.5, -1.])\n");
}

TEST(PrettyTest, OtherDtypesAreNamed) {
  EXPECT_EQ(Show(R"({"dtype":"int32","data":[1,-2]})"),
            "  tensor([1, -2], dtype=int32)\n");
  EXPECT_EQ(Show(R"({"dtype":"uint8","data":[255]})"),
            "  tensor([255], dtype=uint8)\n");
  EXPECT_EQ(Show(R"({"dtype":"float64","data":[6,2.5]})"),
            "  tensor([6., 2.5], dtype=float64)\n");
  EXPECT_EQ(Show(R"({"dtype":"float16","data":[1.5, 2]})"),
            "  tensor([1.5, 2.], dtype=float16)\n");
}

TEST(PrettyTest, ComplexTensors) {
  EXPECT_EQ(Show(R"({"dtype":"complex64","data":[[1,1],[2,-3],[0,0]]})"),
            "  tensor([1+1j, 2-3j, 0+0j], dtype=complex64)\n");
  EXPECT_EQ(Show(R"({"dtype":"complex128","data":[[1.5,2]]})"),
            "  tensor([1.5+2j], dtype=complex128)\n");
}

TEST(PrettyTest, BoolTensors) {
  EXPECT_EQ(Show(R"({"dtype":"bool","data":[true,false]})"),
            "  tensor([True, False], dtype=bool)\n");
}

TEST(PrettyTest, TwoDimensionalTensorsNest) {
  EXPECT_EQ(Show(R"({"dtype":"int64","shape":[2,3],"data":[1,2,3,4,5,6]})"),
            "  tensor([[1, 2, 3], [4, 5, 6]])\n");
  EXPECT_EQ(Show(R"({"dtype":"float32","shape":[3,1],"data":[1,2,3]})"),
            "  tensor([[1.], [2.], [3.]])\n");
}

TEST(PrettyTest, EmptyTensor) {
  EXPECT_EQ(Show(R"({"dtype":"int64","data":[]})"), "  tensor([])\n");
}

TEST(PrettyTest, RanksOneLinePerRank) {
  EXPECT_EQ(Show(R"({"ranks":[{"dtype":"int64","data":[1]},
                              null,
                              [{"dtype":"int64","data":[2]},
                               {"dtype":"complex64","data":[[3,4]]}]]})"),
            "  rank 0: tensor([1])\n"
            "  rank 1: (not taking part)\n"
            "  rank 2: [tensor([2]), tensor([3+4j], dtype=complex64)]\n");
}

TEST(PrettyTest, RanksWithOtherKeysShowThemFirst) {
  EXPECT_EQ(Show(R"({"ranks":[{"dtype":"float32","data":[1]}, null],
                     "op":"sum", "timeout_ms":5, "group":[0,1]})"),
            "  (group=[0, 1], op='sum', timeout_ms=5)\n"
            "  rank 0: tensor([1.])\n"
            "  rank 1: (not taking part)\n");
}

TEST(PrettyTest, KjtIsATableKeysDownSamplesAcross) {
  EXPECT_EQ(Show(R"({"keys":["A","B"],"lengths":[1,0,2,2,1,0],
                     "values":[100,101,102,200,201,202]})"),
            "        0            1       2\n"
            "  'A'   [100]        None    [101, 102]\n"
            "  'B'   [200, 201]   [202]   None\n");
}

TEST(PrettyTest, KjtWeightsInParentheses) {
  EXPECT_EQ(Show(R"({"keys":["A","B"],"lengths":[1,0,2,1],
                     "values":[100,101,102,200],
                     "weights":[1.0,1.5,2,3]})"),
            "        0                       1\n"
            "  'A'   [100 (1.)]              None\n"
            "  'B'   [101 (1.5), 102 (2.)]   [200 (3.)]\n");
}

TEST(PrettyTest, KjtOfTensors) {
  // Lengths of another integer dtype than int64, values a tensor.
  EXPECT_EQ(Show(R"({"keys":["A","B"],
                     "lengths":{"dtype":"int32","data":[1,0,2,1]},
                     "values":{"dtype":"int64","data":[100,101,102,200]},
                     "weights":{"dtype":"float32","data":[1,2,3,4]}})"),
            "        0                      1\n"
            "  'A'   [100 (1.)]             None\n"
            "  'B'   [101 (2.), 102 (3.)]   [200 (4.)]\n");
}

TEST(PrettyTest, KjtWithoutKeys) {
  EXPECT_EQ(Show(R"({"keys":[],"lengths":[],"values":[]})"), "  (no keys)\n");
}

TEST(PrettyTest, MalformedKjtDoesNotCrash) {
  // A negative length shows as no values (None); values are never read
  // outside the tensor (here: 2 asked for, 1 there).
  EXPECT_EQ(Show(R"({"keys":["A"],"lengths":[-1,2],"values":[1]})"),
            "        0      1\n"
            "  'A'   None   [1]\n");
  // Not a KJT: shown as a map.
  EXPECT_EQ(Show(R"({"keys":"A","lengths":[1],"values":[1]})"),
            "  {'keys': 'A', 'lengths': [1], 'values': [1]}\n");
  // Weights that are not a list: left out.
  EXPECT_EQ(Show(R"({"keys":["A"],"lengths":[1],"values":[7],"weights":"w"})"),
            "        0\n"
            "  'A'   [7]\n");
}

TEST(PrettyTest, PerRankKjtsAsIndentedTables) {
  EXPECT_EQ(Show(R"({"ranks":[
                      {"id_list":{"keys":["A","B"],"lengths":[1,0,2,1],
                                  "values":[100,101,102,200]},
                       "id_score_list":{"keys":["C"],"lengths":[0,1],
                                        "values":[300],"weights":[0.5]}},
                      null]})"),
            "  rank 0:\n"
            "    id_list:\n"
            "            0            1\n"
            "      'A'   [100]        None\n"
            "      'B'   [101, 102]   [200]\n"
            "    id_score_list:\n"
            "            0      1\n"
            "      'C'   None   [300 (0.5)]\n"
            "  rank 1: (not taking part)\n");
}

TEST(PrettyTest, KjtOfOneRank) {
  EXPECT_EQ(Show(R"({"ranks":[{"keys":["A"],"lengths":[1],"values":[5]}]})"),
            "  rank 0:\n"
            "          0\n"
            "    'A'   [5]\n");
}

TEST(PrettyTest, MapOfKjtsShownByItself) {
  EXPECT_EQ(
      Show(R"({"id_list":{"keys":["A"],"lengths":[1,1],"values":[1,2]}})"),
      "  id_list:\n"
      "          0     1\n"
      "    'A'   [1]   [2]\n");
}

TEST(PrettyTest, MapsAndListsAsPython) {
  EXPECT_EQ(Show(R"({"b": {"c": true, "d": false}, "a": [1, "x", null, 2.5]})"),
            "  {'a': [1, 'x', None, 2.5], 'b': {'c': True, 'd': False}}\n");
  EXPECT_EQ(Show(R"([1, [2, 3], {}, []])"), "  [1, [2, 3], {}, []]\n");
  EXPECT_EQ(Show(R"({"t": {"dtype":"int32","data":[1]}})"),
            "  {'t': tensor([1], dtype=int32)}\n");
}

TEST(PrettyTest, StringsAreQuotedAsPython) {
  EXPECT_EQ(Show(R"(["it's", "a\\b", "x\ny"])"),
            "  ['it\\'s', 'a\\\\b', 'x\\ny']\n");
}

TEST(PrettyTest, Scalars) {
  EXPECT_EQ(Show("42"), "  42\n");
  EXPECT_EQ(Show("2.5"), "  2.5\n");
  EXPECT_EQ(Show("null"), "  None\n");
  EXPECT_EQ(Show("true"), "  True\n");
  EXPECT_EQ(Show(R"("text")"), "  'text'\n");
}

TEST(PrettyTest, EveryLineEndsInNewline) {
  for (const char* json :
       {R"({"ranks":[1, null, {"keys":["A"],"lengths":[1],"values":[5]}]})",
        R"({"keys":["A"],"lengths":[1],"values":[5]})", "[1, 2]"}) {
    SCOPED_TRACE(json);
    const std::string text = Show(json);
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(text.find("\n\n"), std::string::npos) << text;
    EXPECT_EQ(text.find(" \n"), std::string::npos) << "trailing space:\n"
                                                   << text;
  }
}

// ---- Bounded whatever the value ----

TEST(PrettyTest, EmptyTensorShowsItsShapeInsteadOfWalkingIt) {
  // [2^62, 0]: printing used to iterate every dim.
  Tensor huge = *Tensor::FromBytes(DType::kInt8, {int64_t{1} << 62, 0}, "");
  EXPECT_EQ(Pretty(Value(huge)),
            "  tensor([], size=(4611686018427387904, 0), dtype=int8)\n");
  EXPECT_EQ(Show(R"({"dtype":"float32","shape":[3,0],"data":[]})"),
            "  tensor([], size=(3, 0))\n");
}

TEST(PrettyTest, LargeTensorsAreSummarizedAsTorchDoes) {
  std::vector<int64_t> xs(2000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int64_t>(i);
  EXPECT_EQ(Pretty(Value(Tensor::FromVector(xs))),
            "  tensor([0, 1, 2, ..., 1997, 1998, 1999])\n");
  Tensor square = *Tensor::FromVector(xs, {40, 50});
  EXPECT_EQ(Pretty(Value(square)),
            "  tensor([[0, 1, 2, ..., 47, 48, 49], [50, 51, 52, ..., 97, 98, "
            "99], [100, 101, 102, ..., 147, 148, 149], ..., [1850, 1851, "
            "1852, ..., 1897, 1898, 1899], [1900, 1901, 1902, ..., 1947, "
            "1948, 1949], [1950, 1951, 1952, ..., 1997, 1998, 1999]])\n");
}

TEST(PrettyTest, ManyDimensionsStopAfterAThousandElements) {
  // 7^6 = 117649 elements, summarized to 6^6 = 46656, cut at 1000.
  Tensor t = *Tensor::Zeros(DType::kInt8, {7, 7, 7, 7, 7, 7});
  const std::string text = Pretty(Value(t));
  EXPECT_LT(text.size(), 20000u);
  EXPECT_EQ(std::count(text.begin(), text.end(), '0'), 1000);
}

TEST(PrettyTest, KjtWithLengthsThatOverflowDoesNotCrash) {
  // The issue's KJT: lengths whose sum overflows int64 (`show` segfaulted).
  EXPECT_EQ(Show(R"({"keys":["a","b"],
                     "lengths":{"dtype":"int64","data":[9223372036854775807,
                                9223370937343148033,1,1]},
                     "values":[1]})"),
            "        0     1\n"
            "  'a'   [1]   []\n"
            "  'b'   []    []\n");
}

TEST(PrettyTest, WideKjtsAreCut) {
  std::string lengths = "[1";
  for (int i = 1; i < 100; ++i) lengths += ",1";
  lengths += "]";
  std::string values = "[0";
  for (int i = 1; i < 100; ++i) values += ",0";
  values += "]";
  const std::string text = Show(R"({"keys":["a"],"lengths":)" + lengths +
                                R"(,"values":)" + values + "}");
  // 64 samples of 100, then "...".
  EXPECT_THAT(text, HasSubstr("63    ..."));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("64")));
}

}  // namespace
}  // namespace ctl
}  // namespace ferry
