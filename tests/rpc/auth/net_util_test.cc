// Addresses: host:port parsing and what counts as this host's loopback
// (issue 49: it was decided by the string, so names and target lists an
// attacker chose could pass for loopback and be sent the token).
#include "rpc/auth/net_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

TEST(NetUtilTest, ParsesHostAndPort) {
  ASSERT_OK_AND_ASSIGN(HostPort v4, ParseHostPort("127.0.0.1:80"));
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 80);
  ASSERT_OK_AND_ASSIGN(HostPort v6, ParseHostPort("[::1]:0"));
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(JoinHostPort(v6.host, 5), "[::1]:5");
  EXPECT_THAT(
      ParseHostPort("host"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no port")));
  EXPECT_THAT(
      ParseHostPort("host:99999"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid port")));
  // "::1:5000" is a whole IPv6 address to gRPC (0::1:5000, not loopback),
  // but ::1 and port 5000 to a naive split.
  EXPECT_THAT(
      ParseHostPort("::1:5000"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("brackets")));
}

TEST(NetUtilTest, LoopbackHostsByAddress) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.255.3.4"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("::ffff:127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("0:0:0:0:0:0:0:1"));
  EXPECT_FALSE(IsLoopbackHost("127.0.0.1.example.com"));
  EXPECT_FALSE(IsLoopbackHost("127.evil.example"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("::ffff:10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("::1:5000"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost(""));
  EXPECT_FALSE(IsLoopbackHost("localhost.example.com"));
}

TEST(NetUtilTest, LoopbackTargetsNeedEveryAddressLoopback) {
  EXPECT_TRUE(IsLoopbackTarget("127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackTarget("[::1]:5000"));
  EXPECT_TRUE(IsLoopbackTarget("dns:///127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackTarget("dns:127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackTarget("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackTarget("ipv4:127.0.0.1:1,127.0.0.2:2"));
  EXPECT_TRUE(IsLoopbackTarget("ipv6:[::1]:5000"));
  // The strings, and their kin.
  EXPECT_FALSE(IsLoopbackTarget("127.0.0.1.example.com:5000"));
  EXPECT_FALSE(IsLoopbackTarget("ipv4:127.0.0.1:1,10.0.0.5:80"));
  EXPECT_FALSE(IsLoopbackTarget("ipv4:10.0.0.5:80,127.0.0.1:1"));
  EXPECT_FALSE(IsLoopbackTarget("ipv4:127.0.0.1:1%2C10.0.0.5:80"));
  EXPECT_FALSE(IsLoopbackTarget("127.0.0.1,10.0.0.5:80"));
  EXPECT_FALSE(IsLoopbackTarget("ipv6:[::1]:1,[2001:db8::1]:80"));
  EXPECT_FALSE(IsLoopbackTarget("::1:5000"));
  EXPECT_FALSE(IsLoopbackTarget("dns://8.8.8.8/127.0.0.1:5000"));
  EXPECT_FALSE(IsLoopbackTarget("dns:///127.0.0.1.example.com:5000"));
  EXPECT_FALSE(IsLoopbackTarget("ipv4:localhost:5000"));
  EXPECT_FALSE(IsLoopbackTarget("xds:///127.0.0.1:5000"));
  EXPECT_FALSE(IsLoopbackTarget("unix:/tmp/socket"));
  EXPECT_FALSE(IsLoopbackTarget("ipv4:"));
  EXPECT_FALSE(IsLoopbackTarget("127.0.0.1"));
  EXPECT_FALSE(IsLoopbackTarget(""));
}

}  // namespace
}  // namespace ferry
