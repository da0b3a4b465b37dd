// What a group's point-to-point book keeps for later receives: a message
// an any-source receive got but did not take, handed out once, and at most
// kMaxKeptPerSource of one source at once, whatever the others keep.
#include "collectives/op/p2p_book.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/value.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;

std::string Key(int src, int64_t tag) {
  return absl::StrCat("world/p:", src, ">0:", tag, ":0");
}

TEST(P2pBookTest, AKeptMessageIsHandedOutOnce) {
  P2pBook book;
  ASSERT_OK(book.Keep(1, Key(1, 7), Value(int64_t{3})));
  EXPECT_EQ(book.Take(Key(1, 7)), std::optional<Value>(Value(int64_t{3})));
  EXPECT_EQ(book.Take(Key(1, 7)), std::nullopt);
}

TEST(P2pBookTest, KeptMessagesAreBoundedPerSource) {
  P2pBook book;
  for (size_t tag = 0; tag < P2pBook::kMaxKeptPerSource; ++tag) {
    ASSERT_OK(book.Keep(1, Key(1, tag), Value(int64_t{1})));
  }
  EXPECT_THAT(book.Keep(1, Key(1, -1), Value(int64_t{1})),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(book.Take(Key(1, -1)), std::nullopt);
  // Another source is not held back by rank 1's.
  ASSERT_OK(book.Keep(2, Key(2, 0), Value(int64_t{2})));
  // Taking one gives rank 1 room again.
  ASSERT_TRUE(book.Take(Key(1, 0)).has_value());
  ASSERT_OK(book.Keep(1, Key(1, -1), Value(int64_t{1})));
}

}  // namespace
}  // namespace ferry
