#include "rpc/membership/rendezvous_url.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RendezvousUrlTest, ParsesEndpointsAndJob) {
  ASSERT_OK_AND_ASSIGN(
      EtcdRendezvous r,
      ParseRendezvousUrl("etcd://10.0.0.1:2379,[::1]:2380/train-7.a_b"));
  EXPECT_THAT(r.endpoints, ElementsAre("10.0.0.1:2379", "[::1]:2380"));
  EXPECT_EQ(r.job, "train-7.a_b");
}

TEST(RendezvousUrlTest, RejectsOtherSchemes) {
  EXPECT_THAT(ParseRendezvousUrl("http://h:1/job"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected etcd://")));
}

TEST(RendezvousUrlTest, RejectsMissingOrBadJob) {
  EXPECT_THAT(ParseRendezvousUrl("etcd://h:1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/JOB")));
  EXPECT_THAT(
      ParseRendezvousUrl("etcd://h:1/"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("job name")));
  EXPECT_THAT(ParseRendezvousUrl("etcd://h:1/a/b"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("job name \"a/b\"")));
  EXPECT_THAT(
      ParseRendezvousUrl("etcd://h:1/.."),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("job name")));
  EXPECT_FALSE(IsValidJobName(std::string(129, 'a')));
  EXPECT_TRUE(IsValidJobName(std::string(128, 'a')));
}

TEST(RendezvousUrlTest, RejectsBadEndpoints) {
  EXPECT_THAT(ParseRendezvousUrl("etcd:///job"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseRendezvousUrl("etcd://host-without-port/job"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("host-without-port")));
}

}  // namespace
}  // namespace ferry
