#include "tests/tools/chaos/tally.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/chaos/workload.h"

namespace ferry {
namespace chaos {
namespace {

using ::testing::HasSubstr;

TEST(TallyTest, CountsOpsByOutcomeAndViolations) {
  Tally t;
  t.Op("call", absl::OkStatus());
  t.Op("call", absl::UnavailableError("worker1 died"));
  t.Op("call", absl::UnavailableError("worker2 died"));
  t.Add("faults", "kill9_worker");
  EXPECT_EQ(t.Get("ops", "call OK"), 1);
  EXPECT_EQ(t.Get("ops", "call UNAVAILABLE"), 2);
  EXPECT_EQ(t.Violations(), 0);
  t.Add("violations", "hang");
  t.Add("violations", "leaked_rrefs", 2);
  t.Example("hang", "call: \"quoted\"\nnewline");
  EXPECT_EQ(t.Violations(), 3);
  EXPECT_THAT(t.Text(absl::Seconds(60)), HasSubstr("kill9_worker: 1"));
  EXPECT_EQ(t.Json(absl::Seconds(60)),
            "{\"seconds\":60,\"faults\":{\"kill9_worker\":1},\"ops\":{\"call "
            "OK\":1,\"call UNAVAILABLE\":2},\"violations\":{\"hang\":1,"
            "\"leaked_rrefs\":2},\"examples\":{\"hang\":[\"call: "
            "\\\"quoted\\\" newline\"]}}");
}

TEST(NamesAWorkerTest, NeedsWorkerAndADigit) {
  EXPECT_TRUE(NamesAWorker("UNAVAILABLE: owner worker2 died"));
  EXPECT_TRUE(NamesAWorker("worker10: echo: boom"));
  EXPECT_FALSE(NamesAWorker("the master (rank 0) died"));
  EXPECT_FALSE(NamesAWorker("no worker here"));
  EXPECT_FALSE(NamesAWorker("worker"));
}

}  // namespace
}  // namespace chaos
}  // namespace ferry
