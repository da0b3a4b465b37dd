// What each security mode allows: which files are accepted, where a server
// may listen, where secrets may be sent.
#include "rpc/auth/security.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/secret_files.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::PrivateCopy;
using ::ferry::testing::PrivateFile;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/ferry/tests/testdata/tls/",
                      name);
}

TEST(SecurityTest, SecretFilesReadableByOthersAreRefused) {
  // The checked-in files are 0644.
  EXPECT_THAT(
      Security::Load({.token_file = TestData("token.txt")}),
      StatusIs(absl::StatusCode::kPermissionDenied,
               AllOf(HasSubstr("--token_file"), HasSubstr("chmod 600"))));
  EXPECT_THAT(
      Security::Load({.tls_cert_file = TestData("node.pem"),
                      .tls_key_file = TestData("node.key"),
                      .tls_ca_file = TestData("ca.pem")}),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("--tls_key")));
  EXPECT_OK(Security::Load({.token_file = PrivateCopy(TestData("token.txt"))}));
  EXPECT_THAT(Security::Load({.token_file = PrivateFile("empty", "  \n")}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(Security::Load({.token_file = "/nonexistent/token"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/nonexistent/token")));
}

TEST(SecurityTest, TlsNeedsACompleteSetOrAServerCheckWithAToken) {
  EXPECT_THAT(Security::Load({.tls_cert_file = TestData("node.pem")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Only the CA: the servers are checked, the caller proves itself with the
  // token, which is then required.
  EXPECT_THAT(
      Security::Load({.tls_ca_file = TestData("ca.pem")}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs a token")));
  ASSERT_OK_AND_ASSIGN(
      auto client,
      Security::Load({.tls_ca_file = TestData("ca.pem"),
                      .token_file = PrivateCopy(TestData("token.txt"))}));
  EXPECT_TRUE(client->tls());
  // A client-only configuration cannot serve.
  EXPECT_THAT(
      client->CheckServe("0.0.0.0"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--tls_cert")));
  EXPECT_THAT(
      Security::Load({.tls_cert_file = TestData("node.pem"),
                      .tls_key_file = PrivateCopy(TestData("node.key")),
                      .tls_ca_file = TestData("ca.pem"),
                      .tls_client_certs = false}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs a token")));
}

// Issue 49 R10: `--insecure --tls_cert --tls_key --tls_ca` started and
// served plaintext without a word. Each flag --insecure would drop is named.
TEST(SecurityTest, InsecureWithTlsFlagsOrATokenIsRefused) {
  const std::string key = PrivateCopy(TestData("node.key"));
  EXPECT_THAT(Security::Load({.tls_cert_file = TestData("node.pem"),
                              .tls_key_file = key,
                              .tls_ca_file = TestData("ca.pem"),
                              .insecure = true}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--insecure"), HasSubstr("--tls_cert"),
                             HasSubstr("--tls_key"), HasSubstr("--tls_ca"))));
  EXPECT_THAT(Security::Load({.tls_server_name = "node", .insecure = true}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls_server_name")));
  EXPECT_THAT(
      Security::Load({.tls_identity = TlsIdentity::kSan, .insecure = true}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--tls_identity")));
  EXPECT_THAT(
      Security::Load(
          {.token_file = PrivateCopy(TestData("token.txt")), .insecure = true}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--token_file")));
  EXPECT_OK(Security::Load({.insecure = true}));
}

TEST(SecurityTest, PlaintextServesOnlyThisHostUnlessInsecure) {
  auto local = Security::Insecure();
  EXPECT_OK(local->CheckServe("127.0.0.1"));
  EXPECT_OK(local->CheckServe("::1"));
  EXPECT_OK(local->CheckServe("localhost"));
  EXPECT_THAT(local->CheckServe("0.0.0.0"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("--tls_cert"), HasSubstr("127.0.0.1"),
                             HasSubstr("--insecure"))));
  EXPECT_THAT(local->CheckServe("10.0.0.1"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(local->CheckServe("127.0.0.1.example.com"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(auto insecure, Security::Load({.insecure = true}));
  EXPECT_OK(insecure->CheckServe("0.0.0.0"));
  ASSERT_OK_AND_ASSIGN(
      auto tls,
      Security::Load({.tls_cert_file = TestData("node.pem"),
                      .tls_key_file = PrivateCopy(TestData("node.key")),
                      .tls_ca_file = TestData("ca.pem")}));
  EXPECT_OK(tls->CheckServe("0.0.0.0"));
}

TEST(SecurityTest, SecretsGoOnlyWhereTheyCannotBeRead) {
  ASSERT_OK_AND_ASSIGN(
      auto token,
      Security::Load({.token_file = PrivateCopy(TestData("token.txt"))}));
  EXPECT_TRUE(token->MaySendSecrets("127.0.0.1:5000"));
  EXPECT_TRUE(token->MaySendSecrets("[::1]:5000"));
  EXPECT_TRUE(token->MaySendSecrets("localhost:5000"));
  EXPECT_TRUE(token->MaySendSecrets("unix-abstract:ferry-1"));
  EXPECT_FALSE(token->MaySendSecrets("10.0.0.1:5000"));
  EXPECT_FALSE(token->MaySendSecrets("node7.cluster:5000"));
  // Issue 49: loopback was decided by the host's spelling. A name that
  // starts "127." and a list with one non-loopback entry are not loopback.
  EXPECT_FALSE(token->MaySendSecrets("127.0.0.1.example.com:5000"));
  EXPECT_FALSE(token->MaySendSecrets("ipv4:127.0.0.1:1,10.0.0.5:80"));
  EXPECT_FALSE(token->MaySendSecrets("dns:///127.0.0.1.example.com:5000"));
  EXPECT_TRUE(token->MaySendSecrets("ipv4:127.0.0.1:1,127.0.0.2:80"));
  ASSERT_OK_AND_ASSIGN(
      auto tls,
      Security::Load({.tls_ca_file = TestData("ca.pem"),
                      .token_file = PrivateCopy(TestData("token.txt"))}));
  EXPECT_TRUE(tls->MaySendSecrets("10.0.0.1:5000"));
}

}  // namespace
}  // namespace ferry
