#include "collectives/transport/op_key.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OpKeyTest, NamesSpellTheirMembers) {
  EXPECT_EQ(NewGroupName({2, 0}, 1), "g2,0#1");
  EXPECT_EQ(ClientGroupName({1, 3}), "c1,3");
  EXPECT_EQ(SequencedOpKey(WorldGroupName(), 17), "world/17");
  ASSERT_OK_AND_ASSIGN(std::string tagged, TaggedOpKey("c1,3", "client2.5"));
  EXPECT_EQ(tagged, "c1,3/t:client2.5");
  ASSERT_OK_AND_ASSIGN(std::vector<int> world, MembersOfOp("world/17", 3));
  EXPECT_THAT(world, ElementsAre(0, 1, 2));
  ASSERT_OK_AND_ASSIGN(std::vector<int> g, MembersOfOp("g2,0#1/4", 3));
  EXPECT_THAT(g, ElementsAre(2, 0));
  // A tag may hold '/'.
  ASSERT_OK_AND_ASSIGN(std::vector<int> c, MembersOfOp("c1/t:a/b", 3));
  EXPECT_THAT(c, ElementsAre(1));
}

// After a replacement, sequenced keys carry the group's membership epoch.
TEST(OpKeyTest, EpochsNameOpsAfterAReplacement) {
  EXPECT_EQ(SequencedOpKey(WorldGroupName(), 17, 0), "world/17");
  EXPECT_EQ(SequencedOpKey(WorldGroupName(), 0, 2), "world/0@2");
  EXPECT_EQ(SequencedOpLabel(3, 1), "3@1");
  ASSERT_OK_AND_ASSIGN(std::vector<int> g, MembersOfOp("g2,0#1/4@7", 3));
  EXPECT_THAT(g, ElementsAre(2, 0));
  EXPECT_OK(CheckSender("world/0@2", 0, 2, 0, 3));
  EXPECT_EQ(EpochOfOp("world/17"), 0u);
  EXPECT_EQ(EpochOfOp("world/0@2"), 2u);
  EXPECT_EQ(EpochOfOp("c1/t:a@2"), std::nullopt);  // Tagged: no epoch.
  for (const char* key : {"world/1@", "world/@1", "world/1@x", "world/1@2@3",
                          "world/1@-2", "world/1@123456789012345678901"}) {
    EXPECT_THAT(MembersOfOp(key, 4),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << key;
    EXPECT_EQ(EpochOfOp(key), std::nullopt) << key;
  }
}

TEST(OpKeyTest, TagsAreBounded) {
  EXPECT_THAT(TaggedOpKey("world", ""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TaggedOpKey("world", std::string(kMaxOpTagBytes + 1, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(TaggedOpKey("world", std::string(kMaxOpTagBytes, 'x')).status());
}

TEST(OpKeyTest, ANameNoWorkerMakesIsNoOp) {
  for (const char* key :
       {"",         "/",         "world",    "world/",
        "world/-1", "world/1x",  "world/t:", "galaxy/1",
        "g0,1/1",   "g0,1#/1",   "g0,1#x/1", "g#0/1",
        "g,#0/1",   "g0,,1#0/1", "g0,5#0/1", "g1,1#0/1",
        "c/1",      "c-1/1",     "c0, 1/1",  "world/123456789012345678901"}) {
    EXPECT_THAT(MembersOfOp(key, 4),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << key;
  }
}

// A long run of ranks is refused at the first bad one: no quadratic work
// and no unbounded message.
TEST(OpKeyTest, LongKeysAreRefusedBriefly) {
  std::string key = "c";
  for (int i = 0; i < 100000; ++i) key += "0,";
  key += "/1";
  absl::Status s = MembersOfOp(key, 4).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("rank 0 twice")));
  EXPECT_LT(s.message().size(), 300u);
}

TEST(OpKeyTest, CheckSender) {
  EXPECT_OK(CheckSender("world/1", 0, 2, 0, 3));
  EXPECT_OK(CheckSender("g0,2#0/t:x", MaxSteps(2) - 1, 2, 0, 3));
  EXPECT_THAT(CheckSender("g0,2#0/t:x", MaxSteps(2), 2, 0, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckSender("g0,2#0/1", 0, 1, 0, 3),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(CheckSender("g1,2#0/1", 0, 1, 0, 3),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(CheckSender("world/1", 0, 0, 0, 3),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(CheckSender("world/1", 0, 3, 0, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(OpKeyTest, PointToPointKeys) {
  EXPECT_EQ(PointToPointKey("world", 1, 0, 7, 3, 0), "world/p:1>0:7:3");
  EXPECT_EQ(PointToPointKey("g0,2#1", 2, 0, -5, 0, 4), "g0,2#1/p:2>0:-5:0@4");
  EXPECT_OK(CheckSender("world/p:1>0:7:3", 0, 1, 0, 3));
  EXPECT_OK(CheckSender("g0,2#1/p:2>0:-5:0@4", 0, 2, 0, 3));
  EXPECT_FALSE(EpochOfOp("world/p:1>0:7:3").has_value());
}

// A frame of a point-to-point message is taken only from its sender, at
// its receiver, as step 0: a member of the group cannot send in another's
// name or deliver to a third.
TEST(OpKeyTest, PointToPointFramesComeFromTheirSenderOnly) {
  EXPECT_THAT(CheckSender("world/p:1>0:7:3", 0, 2, 0, 3),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("from rank 1 to rank 0 came from rank 2")));
  EXPECT_THAT(CheckSender("world/p:1>2:7:3", 0, 1, 0, 3),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(
      CheckSender("world/p:1>0:7:3", 1, 1, 0, 3),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has step 1")));
  // Not members of the group.
  EXPECT_THAT(CheckSender("g0,2#0/p:1>0:7:3", 0, 1, 0, 3),
              StatusIs(absl::StatusCode::kPermissionDenied));
  for (const char* bad :
       {"world/p:1>0:7", "world/p:1>0:x:3", "world/p:1>:7:3", "world/p:9>0:7:3",
        "world/p:1>0:7:3@", "world/p:1>0:--7:3", "world/p:1>0>2:7:3",
        "world/p:99999999999999999999>0:7:3"}) {
    EXPECT_THAT(CheckSender(bad, 0, 1, 0, 3),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
}

// Every algorithm's steps are below MaxSteps: the ring all_reduce's last
// is 2·(n-1), broadcast's tree uses step 2.
TEST(OpKeyTest, MaxStepsCoversTheAlgorithms) {
  for (int n = 1; n <= 64; ++n) {
    EXPECT_GT(MaxSteps(n), 2 * (n - 1));
    EXPECT_GT(MaxSteps(n), 2);
  }
}

}  // namespace
}  // namespace ferry
