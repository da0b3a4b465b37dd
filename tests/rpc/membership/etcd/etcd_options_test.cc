#include "rpc/membership/etcd/etcd_options.h"

#include <functional>
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

TEST(ValidateEtcdOptionsTest, AcceptsTheDefaultsWithEndpoints) {
  EtcdOptions options;
  options.endpoints = {"127.0.0.1:2379", "localhost:2380"};
  EXPECT_OK(ValidateEtcdOptions(options));
  options.user = "ferry";  // Loopback only: the password stays here.
  EXPECT_OK(ValidateEtcdOptions(options));
}

TEST(ValidateEtcdOptionsTest, NamesWhatIsWrong) {
  struct Case {
    std::function<void(EtcdOptions*)> change;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](EtcdOptions* o) { o->endpoints.clear(); }, "no etcd endpoints"},
      {[](EtcdOptions* o) {
         o->endpoints = {"a:1", "b"};
       },
       "'b'"},
      {[](EtcdOptions* o) { o->call_timeout = absl::ZeroDuration(); },
       "call_timeout must be positive"},
      {[](EtcdOptions* o) { o->connect_timeout = absl::InfiniteDuration(); },
       "connect_timeout must be positive and finite"},
      {[](EtcdOptions* o) { o->retry_backoff = -absl::Seconds(1); },
       "retry_backoff"},
      {[](EtcdOptions* o) { o->tls_cert_file = "c.pem"; }, "need a CA file"},
      {[](EtcdOptions* o) {
         o->tls_ca_file = "ca.pem";
         o->tls_key_file = "k.pem";
       },
       "give both or neither"},
      {[](EtcdOptions* o) {
         o->endpoints = {"127.0.0.1:2379", "etcd.example:2379"};
         o->user = "ferry";
       },
       "unencrypted to etcd.example:2379"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EtcdOptions options;
    options.endpoints = {"127.0.0.1:2379"};
    cases[i].change(&options);
    EXPECT_THAT(
        ValidateEtcdOptions(options),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(cases[i].says)))
        << "case " << i;
  }
}

TEST(IsLoopbackEndpointTest, KnowsLoopbackHosts) {
  EXPECT_TRUE(IsLoopbackEndpoint("127.0.0.1:2379"));
  EXPECT_TRUE(IsLoopbackEndpoint("127.1.2.3:2379"));
  EXPECT_TRUE(IsLoopbackEndpoint("[::1]:2379"));
  EXPECT_TRUE(IsLoopbackEndpoint("localhost:2379"));
  EXPECT_FALSE(IsLoopbackEndpoint("10.0.0.1:2379"));
  EXPECT_FALSE(IsLoopbackEndpoint("etcd:2379"));
}

TEST(EtcdPrefixEndTest, IsTheFirstKeyAfterThePrefix) {
  EXPECT_EQ(EtcdPrefixEnd("/job/"), "/job0");
  EXPECT_EQ(EtcdPrefixEnd("a\xff"), "b");
  EXPECT_EQ(EtcdPrefixEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(EtcdPrefixEnd(""), std::string(1, '\0'));
}

}  // namespace
}  // namespace ferry
