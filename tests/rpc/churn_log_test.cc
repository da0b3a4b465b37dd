// Clients' departures in a worker's log (issue 25): a token holder churning
// clients gets one line per interval on each worker, not one per client.
#include "rpc/churn_log.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ChurnLogTest : public ::testing::Test {
 protected:
  std::vector<std::string> Lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  ManualClock clock_;
  ManualTimers timers_{&clock_};
  absl::Mutex mu_;
  std::vector<std::string> lines_;
  ChurnLog log_{&timers_, absl::Seconds(10), [this](absl::string_view line) {
                  absl::MutexLock lock(&mu_);
                  lines_.emplace_back(line);
                }};
};

TEST_F(ChurnLogTest, AQuietDepartureIsReportedAtOnce) {
  log_.Departed("client1: client1 left the job");
  EXPECT_THAT(Lines(), ElementsAre("client1: client1 left the job"));
  timers_.Advance(absl::Seconds(11));
  log_.Departed("client2: client2 left the job");
  EXPECT_EQ(Lines().size(), 2u);
}

TEST_F(ChurnLogTest, AFloodIsOneLinePerInterval) {
  for (int i = 0; i < 2000; ++i) {
    log_.Departed(absl::StrCat("client", i, ": left"));
  }
  ASSERT_EQ(Lines().size(), 1u);
  timers_.Advance(absl::Seconds(10));
  ASSERT_EQ(Lines().size(), 2u);
  EXPECT_THAT(Lines()[1], HasSubstr("1999 more nodes left or died in the "
                                    "last 10s"));
  EXPECT_THAT(Lines()[1], HasSubstr("the latest: client1999: left"));
  // Still churning: counted again, one line at the next interval's end.
  for (int i = 0; i < 500; ++i) log_.Departed("again");
  EXPECT_EQ(Lines().size(), 2u);
  timers_.Advance(absl::Seconds(10));
  ASSERT_EQ(Lines().size(), 3u);
  EXPECT_THAT(Lines()[2], HasSubstr("500 more nodes"));
  // Nothing held back: nothing more.
  timers_.Advance(absl::Seconds(30));
  EXPECT_EQ(Lines().size(), 3u);
}

TEST_F(ChurnLogTest, NothingAfterStop) {
  log_.Departed("a");
  log_.Departed("b");
  log_.Stop();
  timers_.Advance(absl::Seconds(20));
  log_.Departed("c");
  EXPECT_THAT(Lines(), ElementsAre("a"));
}

}  // namespace
}  // namespace ferry
