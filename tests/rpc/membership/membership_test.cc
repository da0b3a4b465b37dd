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

}  // namespace
}  // namespace ferry
