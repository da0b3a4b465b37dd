// A worker's membership events on the manual clock: numbered and kept
// (the last kKept), told to subscribers, and long-polled — answered at
// once, by the next event, or empty at the end of the wait — with the
// number of waiting polls bounded.
#include "rpc/membership/membership_events.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

MembershipEvent Died(int rank) {
  return {.kind = "died",
          .rank = rank,
          .worker = absl::StrCat("worker", rank),
          .detail = "missed heartbeats"};
}

std::vector<int64_t> Seqs(const std::vector<MembershipEvent>& events) {
  std::vector<int64_t> out;
  for (const MembershipEvent& e : events) out.push_back(e.seq);
  return out;
}

class MembershipEventsTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  ManualTimers timers_{&clock_};
  MembershipEvents events_{&timers_};
};

TEST_F(MembershipEventsTest, NumbersKeepsAndTellsSubscribers) {
  std::vector<std::string> heard;
  const int64_t id = events_.Subscribe(
      [&](const MembershipEvent& e) { heard.push_back(e.worker); });
  events_.Record(Died(2));
  events_.Record(Died(3));
  events_.Unsubscribe(id);
  events_.Record(Died(1));
  EXPECT_THAT(heard, ElementsAre("worker2", "worker3"));
  EXPECT_EQ(events_.last(), 3);
  EXPECT_THAT(Seqs(events_.Since(1)), ElementsAre(2, 3));
  Value v = EventValue(events_.Since(0)[0]);
  EXPECT_EQ(*v.Find("event"), Value("died"));
  EXPECT_EQ(*v.Find("rank"), Value(2));
  EXPECT_EQ(v.Find("group"), nullptr);
}

TEST_F(MembershipEventsTest, KeepsOnlyTheLastEvents) {
  for (size_t i = 0; i < MembershipEvents::kKept + 10; ++i) {
    events_.Record(Died(1));
  }
  std::vector<MembershipEvent> kept = events_.Since(0);
  ASSERT_EQ(kept.size(), MembershipEvents::kKept);
  EXPECT_EQ(kept.front().seq, 11);
}

TEST_F(MembershipEventsTest, APollIsAnsweredAtOnceByTheNextEventOrEmpty) {
  events_.Record(Died(1));
  // At once: there is one above 0.
  Future<std::vector<MembershipEvent>> now = events_.Poll(0, absl::Seconds(10));
  ASSERT_TRUE(now.IsReady());
  EXPECT_THAT(Seqs(*now.Wait(absl::ZeroDuration())), ElementsAre(1));
  // By the next event.
  Future<std::vector<MembershipEvent>> next =
      events_.Poll(1, absl::Seconds(10));
  timers_.Advance(absl::Seconds(5));
  EXPECT_FALSE(next.IsReady());
  events_.Record(Died(2));
  ASSERT_TRUE(next.IsReady());
  EXPECT_THAT(Seqs(*next.Wait(absl::ZeroDuration())), ElementsAre(2));
  // Empty at the end of its wait.
  Future<std::vector<MembershipEvent>> quiet =
      events_.Poll(2, absl::Seconds(10));
  timers_.Advance(absl::Seconds(9));
  EXPECT_FALSE(quiet.IsReady());
  timers_.Advance(absl::Seconds(1));
  ASSERT_TRUE(quiet.IsReady());
  EXPECT_THAT(*quiet.Wait(absl::ZeroDuration()), IsEmpty());
  // A number past the last (a watcher of an earlier process) means "from
  // now on".
  Future<std::vector<MembershipEvent>> ahead =
      events_.Poll(1000, absl::Seconds(10));
  events_.Record(Died(3));
  EXPECT_THAT(Seqs(*ahead.Wait(absl::ZeroDuration())), ElementsAre(3));
}

TEST_F(MembershipEventsTest, WaitingPollsAreBoundedAndEndAtStop) {
  std::vector<Future<std::vector<MembershipEvent>>> polls;
  for (size_t i = 0; i < MembershipEvents::kMaxPolls; ++i) {
    polls.push_back(events_.Poll(0, absl::Seconds(10)));
  }
  EXPECT_THAT(events_.Poll(0, absl::Seconds(10)).Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kResourceExhausted));
  events_.Stop();
  for (const auto& p : polls) {
    ASSERT_TRUE(p.IsReady());
    EXPECT_THAT(*p.Wait(absl::ZeroDuration()), IsEmpty());
  }
  EXPECT_THAT(events_.Poll(0, absl::Seconds(10)).Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace ferry
