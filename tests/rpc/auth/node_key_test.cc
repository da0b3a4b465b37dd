// Node key pairs and what two nodes derive from theirs (issue 25): the
// same secret on both ends, nothing for a third key, and tokens that name
// both ends, so one made for a node is worth nothing at another.
#include "rpc/auth/node_key.h"

#include <set>
#include <string>

#include "absl/strings/escaping.h"
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

// What a token and a voucher tag are, pinned: workers of different builds
// in one job must derive the same (HKDF-SHA256 of the pair secret, salted
// with the scheme's name, over both ends' nodes and keys).
TEST(NodeKeyTest, TokensAreDerivedAsTheSchemeSays) {
  const std::string secret(kTokenBytes, '\x11');
  const std::string a(kPublicKeyBytes, 'a'), b(kPublicKeyBytes, 'b'),
      c(kPublicKeyBytes, 'c');
  const KeyedNode from{1, a}, to{2, b}, client{9, c};
  // (Computed apart, by RFC 5869 over Python's hmac.)
  EXPECT_EQ(absl::BytesToHexString(CallToken(secret, from, to)),
            "1343899303ee6c34e8cf1b1e047f7c291ff7e6705b84859ac082f98c65a51f1b");
  EXPECT_EQ(absl::BytesToHexString(VoucherTag(secret, from, to, client)),
            "30f466cb3f65259d318a1e8fa2fad9a1a348780692167da4606d636e8a71fdf7");
}

}  // namespace
}  // namespace ferry
