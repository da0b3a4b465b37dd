#include "rpc/membership/membership.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/membership/directory.h"
#include "rpc/value/value.h"

namespace ferry {
namespace {

TEST(MembershipTest, ListenersHearOfEachNodeOnce) {
  Membership m;
  std::vector<uint64_t> heard;
  m.AddListener(
      [&](uint64_t node, const absl::Status&) { heard.push_back(node); });
  EXPECT_TRUE(m.MarkDown(2, absl::UnavailableError("worker2 died")));
  EXPECT_FALSE(m.MarkDown(2, absl::UnavailableError("again")));
  EXPECT_THAT(heard, ::testing::ElementsAre(2));
  ASSERT_TRUE(m.DownReason(2).has_value());
  EXPECT_EQ(m.DownReason(2)->message(), "worker2 died");
  EXPECT_FALSE(m.DownReason(1).has_value());
}

// Before, every client that ever left stayed in the table: a long job with
// many short-lived clients (ferryctl commands) grew it without bound.
TEST(MembershipTest, OnlyRecentClientsAreRemembered) {
  Membership m;
  ASSERT_TRUE(m.MarkDown(WorkerNode(3), absl::UnavailableError("w3")));
  const uint64_t n = 10 * Membership::kClientMemory;
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(m.MarkDown(kFirstClientNode + i, absl::UnavailableError("c")));
  }
  EXPECT_EQ(m.DownNodes().size(), Membership::kClientMemory + 1);
  // Workers stay; the oldest clients are forgotten, the newest kept.
  EXPECT_TRUE(m.DownReason(WorkerNode(3)).has_value());
  EXPECT_FALSE(m.DownReason(kFirstClientNode).has_value());
  EXPECT_TRUE(m.DownReason(kFirstClientNode + n - 1).has_value());
  EXPECT_TRUE(m.DownReason(kFirstClientNode + n - Membership::kClientMemory)
                  .has_value());
  EXPECT_FALSE(
      m.DownReason(kFirstClientNode + n - Membership::kClientMemory - 1)
          .has_value());
}

TEST(MembershipTest, WorkersAreNeverForgotten) {
  Membership m;
  for (int r = 0; r < 3000; ++r) {
    ASSERT_TRUE(m.MarkDown(WorkerNode(r), absl::UnavailableError("w")));
  }
  for (uint64_t i = 0; i < 2 * Membership::kClientMemory; ++i) {
    ASSERT_TRUE(m.MarkDown(kFirstClientNode + i, absl::UnavailableError("c")));
  }
  for (int r = 0; r < 3000; ++r)
    EXPECT_TRUE(m.DownReason(WorkerNode(r)).has_value()) << r;
}

TEST(MembershipTest, ARevivedWorkerIsAliveAndCanDieAgain) {
  Membership m;
  int heard = 0;
  m.AddListener([&](uint64_t, const absl::Status&) { ++heard; });
  EXPECT_FALSE(m.Revive(WorkerNode(1)));  // Not gone.
  ASSERT_TRUE(m.MarkDown(WorkerNode(1), absl::UnavailableError("old")));
  EXPECT_TRUE(m.Revive(WorkerNode(1)));
  EXPECT_FALSE(m.DownReason(WorkerNode(1)).has_value());
  EXPECT_TRUE(m.MarkDown(WorkerNode(1), absl::UnavailableError("new")));
  EXPECT_EQ(heard, 2);
  // Clients never come back.
  ASSERT_TRUE(m.MarkDown(kFirstClientNode, absl::UnavailableError("c")));
  EXPECT_FALSE(m.Revive(kFirstClientNode));
  EXPECT_TRUE(m.DownReason(kFirstClientNode).has_value());
}

TEST(DirectoryTest, AReplacementIsSeenThroughEveryCopy) {
  Directory d({{"worker0", 0, "h:1"}, {"worker1", 1, "h:2"}});
  const Directory copy = d;
  const WorkerInfo& before = d.at(1);
  ASSERT_TRUE(d.Replace({"worker1", 1, "h:9"}).ok());
  EXPECT_EQ(copy.at(1).address, "h:9");
  EXPECT_EQ(before.address, "h:2");  // Old references stay valid.
  absl::StatusOr<const WorkerInfo*> by_name = copy.Resolve("worker1");
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ((*by_name)->address, "h:9");
  EXPECT_EQ(d.workers()[1].address, "h:9");
  EXPECT_EQ(d.Replace({"worker5", 5, "h:5"}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
