// Unit tests of `ferryctl status --format=table` (StatusTable in
// tools/ferryctl/commands.h): a header and one aligned row per worker of a
// value shaped like StatusCommand's result.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/testing/status_matchers.h"
#include "tools/ferryctl/commands.h"

namespace ferry {
namespace ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

// Two serving workers and one that did not answer (as StatusCommand lists
// an unreachable worker: no counters, "state":"unreachable", "error").
constexpr char kStatus[] = R"({"workers":[
  {"name":"worker0","rank":0,"state":"serving","address":"127.0.0.1:29500",
   "pid":4242,"uptime_ms":1500,"inflight":0,"owned_rrefs":2,"user_rrefs":1,
   "collectives_inflight":0,"build":"x"},
  {"name":"worker1","rank":1,"state":"serving","address":"127.0.0.1:29501",
   "pid":4243,"uptime_ms":123456,"inflight":12,"owned_rrefs":0,
   "user_rrefs":10,"collectives_inflight":1},
  {"name":"worker2","rank":2,"state":"unreachable",
   "address":"127.0.0.1:29502","error":"connection refused"}]})";

std::string Table(const std::string& json) {
  absl::StatusOr<Value> v = ParseJson(json);
  EXPECT_OK(v);
  return v.ok() ? StatusTable(*v) : "";
}

TEST(StatusTableTest, HeaderAndOneRowPerWorker) {
  EXPECT_EQ(Table(kStatus),
            "NAME     RANK  STATE                             ADDRESS          "
            "PID   UPTIME  CALLS  OWNED  HELD  COLLECTIVES\n"
            "worker0  0     serving                           127.0.0.1:29500  "
            "4242  1.5s    0      2      1     0\n"
            "worker1  1     serving                           127.0.0.1:29501  "
            "4243  123.5s  12     0      10    1\n"
            "worker2  2     unreachable (connection refused)  127.0.0.1:29502  "
            "-     -       -      -      -     -\n");
}

TEST(StatusTableTest, ColumnsAreAligned) {
  std::vector<std::string> lines =
      absl::StrSplit(Table(kStatus), '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(4));
  // Every column starts where its heading does.
  for (const char* heading : {"RANK", "STATE", "ADDRESS", "PID", "UPTIME",
                              "CALLS", "OWNED", "HELD", "COLLECTIVES"}) {
    const size_t at = lines[0].find(heading);
    ASSERT_NE(at, std::string::npos) << heading;
    for (size_t r = 1; r < lines.size(); ++r) {
      ASSERT_GT(lines[r].size(), at) << lines[r];
      EXPECT_EQ(lines[r][at - 1], ' ') << heading << " in " << lines[r];
      EXPECT_NE(lines[r][at], ' ') << heading << " in " << lines[r];
    }
  }
}

TEST(StatusTableTest, UnreachableWorkerShowsItsError) {
  std::vector<std::string> lines =
      absl::StrSplit(Table(kStatus), '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(4));
  EXPECT_THAT(lines[3], StartsWith("worker2  2     unreachable (connection "
                                   "refused)  127.0.0.1:29502  -"));
}

TEST(StatusTableTest, NoWorkersIsJustTheHeader) {
  EXPECT_EQ(Table(R"({"workers":[]})"),
            "NAME  RANK  STATE  ADDRESS  PID  UPTIME  CALLS  OWNED  HELD  "
            "COLLECTIVES\n");
  EXPECT_EQ(Table("{}"), Table(R"({"workers":[]})"));
}

TEST(StatusTableTest, ErrorWithoutState) {
  // A worker entry with only a name and an error still gets a row.
  EXPECT_THAT(Table(R"({"workers":[{"name":"w","error":"timed out"}]})"),
              HasSubstr("\nw     -     "));
  EXPECT_THAT(Table(R"({"workers":[{"name":"w","error":"timed out"}]})"),
              HasSubstr("(timed out)"));
}

}  // namespace
}  // namespace ctl
}  // namespace ferry
