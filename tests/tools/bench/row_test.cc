// ferry_bench's rows: the JSON form its peers print, medians over rounds,
// and which ferry row a peer's row is compared with.
#include "tools/bench/row.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tools/bench/report.h"
#include "tools/bench/samples.h"

namespace ferry {
namespace bench {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

Row Sample(const char* system, const char* op, double value) {
  return {"collectives", "op_time_us", system, op, 1 << 20, 4, 1, value};
}

TEST(RowTest, JsonRoundTrips) {
  Row row{"rpc", "bandwidth_MBps", "torch_rpc", "echo", 67108864, 2,
          1,     253.875};
  EXPECT_EQ(RowJson(row),
            "{\"suite\":\"rpc\",\"metric\":\"bandwidth_MBps\",\"system\":"
            "\"torch_rpc\",\"op\":\"echo\",\"size_bytes\":67108864,\"world\":2,"
            "\"inflight\":1,\"value\":253.875}");
  ASSERT_OK_AND_ASSIGN(Row parsed, ParseRow(RowJson(row)));
  EXPECT_TRUE(parsed.Key() == row.Key());
  EXPECT_DOUBLE_EQ(parsed.value, 253.875);
}

TEST(RowTest, ParsesPythonsJsonInAnyOrder) {
  // json.dumps with default separators, keys reordered, an escape.
  ASSERT_OK_AND_ASSIGN(
      Row row,
      ParseRow("{\"value\": 1.5e3, \"op\": \"all_\\\"reduce\", \"world\": 4, "
               "\"inflight\": 1, \"suite\": \"collectives\", \"metric\": "
               "\"op_time_us\", \"system\": \"torch_gloo\", \"size_bytes\": "
               "8}"));
  EXPECT_EQ(row.op, "all_\"reduce");
  EXPECT_EQ(row.system, "torch_gloo");
  EXPECT_EQ(row.size_bytes, 8);
  EXPECT_EQ(row.world, 4);
  EXPECT_DOUBLE_EQ(row.value, 1500);
}

TEST(RowTest, RejectsMalformedRowsNamingTheField) {
  const std::string good = RowJson(Sample("ferry", "all_reduce", 1));
  std::string no_world = good;
  no_world.replace(no_world.find("\"world\":4,"), 10, "");
  EXPECT_THAT(ParseRow(no_world),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world")));
  std::string huge_world = good;
  huge_world.replace(huge_world.find("\"world\":4"), 9, "\"world\":70000");
  EXPECT_THAT(ParseRow(huge_world),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world")));
  std::string negative = good;
  negative.replace(negative.find("\"size_bytes\":"), 13, "\"size_bytes\":-");
  EXPECT_THAT(ParseRow(negative), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("size_bytes")));
  std::string extra = good;
  extra.insert(1, "\"color\":\"red\",");
  EXPECT_THAT(ParseRow(extra),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("color")));
  EXPECT_THAT(ParseRow(good + good),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseRow(good.substr(0, good.size() - 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::string text_value =
      good.substr(0, good.find("\"value\":")) + "\"value\":\"1\"}";
  EXPECT_THAT(ParseRow(text_value),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("value")));
  EXPECT_THAT(ParseRow(std::string(5000, ' ')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("4096")));
}

TEST(SampleSetTest, MedianPerRowOverRoundsInFirstSeenOrder) {
  SampleSet samples;
  for (double v : {30.0, 10.0, 20.0}) {
    samples.Add(Sample("ferry", "all_reduce", v));
    samples.Add(Sample("torch_gloo", "all_reduce", 10 * v));
  }
  samples.Add(Sample("ferry", "broadcast", 5));
  samples.Add(Sample("ferry", "broadcast", 7));  // Even count: upper middle.
  std::vector<Row> rows = samples.Medians();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].system, "ferry");
  EXPECT_EQ(rows[0].op, "all_reduce");
  EXPECT_DOUBLE_EQ(rows[0].value, 20);
  EXPECT_EQ(rows[1].system, "torch_gloo");
  EXPECT_DOUBLE_EQ(rows[1].value, 200);
  EXPECT_EQ(rows[2].op, "broadcast");
  EXPECT_DOUBLE_EQ(rows[2].value, 7);
}

TEST(SampleSetTest, RowsDifferingInAnyKeyFieldStaySeparate) {
  SampleSet samples;
  Row a = Sample("ferry", "all_reduce", 1);
  Row b = a;
  b.world = 2;
  Row c = a;
  c.inflight = 16;
  for (const Row& r : {a, b, c}) samples.Add(r);
  EXPECT_EQ(samples.Medians().size(), 3u);
}

TEST(ReportTest, PeersCompareWithFerrysLikeForLikeRow) {
  std::vector<Row> rows = {
      {"rpc", "calls_per_s", "ferry", "echo_tcp", 8, 2, 128, 1000},
      {"rpc", "calls_per_s", "ferry", "echo", 8, 2, 128, 2000},
      {"rpc", "calls_per_s", "torch_rpc", "echo", 8, 2, 128, 100},
      {"rpc", "calls_per_s", "torch_rpc_shm", "echo", 8, 2, 128, 100},
      {"rpc", "calls_per_s", "grpc", "echo_uds", 8, 2, 128, 100},
      {"rpc", "calls_per_s", "torch_rpc", "echo", 8, 2, 16, 100},
      Sample("ferry", "all_reduce", 1),
      Sample("torch_gloo", "all_reduce", 2),
      Sample("gloo", "broadcast", 2),
  };
  EXPECT_EQ(FerryCounterpart(rows, rows[2]), &rows[0]);  // TCP: echo_tcp.
  EXPECT_EQ(FerryCounterpart(rows, rows[3]), &rows[1]);  // One host: echo.
  EXPECT_EQ(FerryCounterpart(rows, rows[4]), &rows[1]);
  EXPECT_EQ(FerryCounterpart(rows, rows[5]), nullptr);  // No 16 in flight.
  EXPECT_EQ(FerryCounterpart(rows, rows[7]), &rows[6]);
  EXPECT_EQ(FerryCounterpart(rows, rows[8]), nullptr);  // No ferry broadcast.
  EXPECT_EQ(FerryCounterpart(rows, rows[0]), nullptr);  // Ferry's own.
}

}  // namespace
}  // namespace bench
}  // namespace ferry
