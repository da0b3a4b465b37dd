// Node key pairs and what two nodes derive from theirs (issue 25): the
// same secret on both ends, nothing for a third key, and tokens that name
// both ends, so one made for a node is worth nothing at another.
#include "rpc/auth/node_key.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;

TEST(NodeKeyTest, BothEndsAgreeOnOneSecretNobodyElseHas) {
  auto a = NodeKey::Generate(), b = NodeKey::Generate(),
       c = NodeKey::Generate();
  EXPECT_EQ(a->public_key().size(), kPublicKeyBytes);
  EXPECT_NE(a->public_key(), b->public_key());
  ASSERT_OK_AND_ASSIGN(std::string ab, a->Agree(b->public_key()));
  ASSERT_OK_AND_ASSIGN(std::string ba, b->Agree(a->public_key()));
  ASSERT_OK_AND_ASSIGN(std::string cb, c->Agree(b->public_key()));
  EXPECT_EQ(ab, ba);
  EXPECT_EQ(ab.size(), kTokenBytes);
  EXPECT_NE(ab, cb);
}

TEST(NodeKeyTest, UnusableKeysAreRefused) {
  auto a = NodeKey::Generate();
  EXPECT_THAT(a->Agree("short"), StatusIs(absl::StatusCode::kInvalidArgument));
  // The all-zero point (and other low-order points) give a secret anyone
  // knows.
  EXPECT_THAT(a->Agree(std::string(kPublicKeyBytes, '\0')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckPublicKey(std::string(kPublicKeyBytes, '\0'), "Join"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(CheckPublicKey(a->public_key(), "Join"));
}

TEST(NodeKeyTest, ATokenNamesBothEndsAndTheirKeys) {
  auto a = NodeKey::Generate(), b = NodeKey::Generate(),
       b2 = NodeKey::Generate();
  const std::string secret = *a->Agree(b->public_key());
  const std::string ab =
      CallToken(secret, {1, a->public_key()}, {2, b->public_key()});
  EXPECT_EQ(ab.size(), kTokenBytes);
  EXPECT_EQ(ab, CallToken(*b->Agree(a->public_key()), {1, a->public_key()},
                          {2, b->public_key()}));
  std::set<std::string> others = {
      // The other direction, another destination node, another sender
      // node, another incarnation of the destination.
      CallToken(secret, {2, b->public_key()}, {1, a->public_key()}),
      CallToken(secret, {1, a->public_key()}, {3, b->public_key()}),
      CallToken(secret, {4, a->public_key()}, {2, b->public_key()}),
      CallToken(*a->Agree(b2->public_key()), {1, a->public_key()},
                {2, b2->public_key()}),
      VoucherTag(secret, {1, a->public_key()}, {2, b->public_key()},
                 {9, a->public_key()})};
  EXPECT_EQ(others.size(), 5u);
  EXPECT_EQ(others.count(ab), 0u);
}

TEST(NodeKeyTest, RandomnessIsFresh) {
  EXPECT_NE(NewSecret(), NewSecret());
  EXPECT_EQ(NewSecret().size(), 64u);
  EXPECT_NE(RandomU64(), RandomU64());
}

}  // namespace
}  // namespace ferry
