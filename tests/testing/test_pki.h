// A certificate authority made at test time with the openssl CLI, and
// certificates it signs with the subjectAltNames a test needs (e.g. one
// per worker, naming it). Keys are EC P-256, written readable by their
// owner only (rpc/auth/security.h refuses others); everything is valid for two
// days and lives under the directory given.
//
//   if (!TestPki::Installed()) GTEST_SKIP() << TestPki::SkipReason();
//   ASSERT_OK_AND_ASSIGN(TestPki pki, TestPki::Create(dir));
//   ASSERT_OK_AND_ASSIGN(CertFiles w1, pki.Issue("worker1", {"DNS:worker1"}));
//   Security::Load({.tls_cert_file = w1.cert_file,
//                   .tls_key_file = w1.key_file,
//                   .tls_ca_file = pki.ca_file()});
#ifndef FERRY_TESTS_TESTING_TEST_PKI_H_
#define FERRY_TESTS_TESTING_TEST_PKI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {
namespace testing {

struct CertFiles {
  std::string cert_file;  // PEM certificate.
  std::string key_file;   // PEM private key, mode 0600.
};

class TestPki {
 public:
  // The openssl binary: $FERRY_OPENSSL if set, else /usr/bin/openssl.
  static std::string Binary();
  static bool Installed();
  // For GTEST_SKIP when not Installed().
  static std::string SkipReason();

  // A fresh CA in `dir` (created if missing). INTERNAL with openssl's
  // output if it fails.
  static absl::StatusOr<TestPki> Create(const std::string& dir);

  // A certificate for `name` (its subject's CN and file names) signed by
  // the CA, for TLS clients and servers alike, whose subjectAltNames are
  // `sans` (openssl's syntax: "DNS:worker1", "URI:worker2") and
  // IP:127.0.0.1, the address tests dial servers at.
  absl::StatusOr<CertFiles> Issue(const std::string& name,
                                  const std::vector<std::string>& sans) const;

  const std::string& ca_file() const { return ca_file_; }

 private:
  TestPki(std::string dir, std::string ca_file, std::string ca_key_file);

  std::string dir_;
  std::string ca_file_;
  std::string ca_key_file_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_TEST_PKI_H_
