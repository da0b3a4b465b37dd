// Status assertions for GoogleTest (Abseil 20220623 ships none).
//
//   EXPECT_OK(DoThing());
//   ASSERT_OK_AND_ASSIGN(Tensor t, MakeTensor());
//   EXPECT_THAT(Parse("x"), StatusIs(absl::StatusCode::kInvalidArgument,
//                                    HasSubstr("line 1")));
#ifndef FERRY_TESTS_TESTING_STATUS_MATCHERS_H_
#define FERRY_TESTS_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER_P2(StatusIsImpl, code, message_matcher, "") {
  const absl::Status& s = ::ferry::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::Matches(message_matcher)(std::string(s.message()));
}

// Matches a Status or StatusOr with `code` and a message matching `m`.
template <typename M>
auto StatusIs(absl::StatusCode code, M m) {
  return StatusIsImpl(code, ::testing::MatcherCast<const std::string&>(m));
}
inline auto StatusIs(absl::StatusCode code) {
  return StatusIs(code, ::testing::_);
}

}  // namespace testing
}  // namespace ferry

#define EXPECT_OK(expr)                                                \
  do {                                                                 \
    const ::absl::Status ferry_s_ = ::ferry::testing::GetStatus(expr); \
    EXPECT_TRUE(ferry_s_.ok()) << ferry_s_;                            \
  } while (false)

#define ASSERT_OK(expr)                                                \
  do {                                                                 \
    const ::absl::Status ferry_s_ = ::ferry::testing::GetStatus(expr); \
    ASSERT_TRUE(ferry_s_.ok()) << ferry_s_;                            \
  } while (false)

#define FERRY_TEST_CONCAT_INNER_(a, b) a##b
#define FERRY_TEST_CONCAT_(a, b) FERRY_TEST_CONCAT_INNER_(a, b)

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                    \
  ASSERT_OK_AND_ASSIGN_IMPL_(FERRY_TEST_CONCAT_(ferry_sor_, __LINE__), lhs, \
                             rexpr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                               \
  ASSERT_TRUE(tmp.ok()) << tmp.status();            \
  lhs = std::move(tmp).value()

#endif  // FERRY_TESTS_TESTING_STATUS_MATCHERS_H_
