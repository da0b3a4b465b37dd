#include "rpc/membership/etcd/etcd_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/membership/etcd/etcd_types.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseEtcdEndpointsTest, AcceptsHostPortLists) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::string> endpoints,
      ParseEtcdEndpoints("127.0.0.1:2379, etcd-1.example:2380,[::1]:2381"));
  EXPECT_THAT(endpoints, ElementsAre("127.0.0.1:2379", "etcd-1.example:2380",
                                     "[::1]:2381"));
}

TEST(ParseEtcdEndpointsTest, NamesTheBadEntry) {
  EXPECT_THAT(ParseEtcdEndpoints(""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no etcd endpoints")));
  struct Case {
    std::string list;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"127.0.0.1", "'127.0.0.1': expected HOST:PORT"},
           {"a:1,b", "'b': expected HOST:PORT"},
           {"a:0", "'a:0': port must be 1..65535"},
           {"a:65536", "port must be 1..65535"},
           {"a:x", "port must be 1..65535"},
           {":2379", "empty host"},
           {"a:1,,b:2", "'': expected HOST:PORT"},
           {"http://a:1", "bad host"},
           {"::1:2379", "bad host"},
           {"[::1:2379", "unclosed"},
       }) {
    EXPECT_THAT(ParseEtcdEndpoints(c.list),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.says)))
        << c.list;
  }
}

TEST(EtcdPrefixEndTest, IsTheFirstKeyAfterThePrefix) {
  EXPECT_EQ(EtcdPrefixEnd("/job/"), "/job0");
  EXPECT_EQ(EtcdPrefixEnd("a\xff"), "b");
  EXPECT_EQ(EtcdPrefixEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(EtcdPrefixEnd(""), std::string(1, '\0'));
}

}  // namespace
}  // namespace ferry
