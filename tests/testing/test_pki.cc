#include "tests/testing/test_pki.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {

namespace {

constexpr absl::Duration kOpensslTimeout = absl::Seconds(30);
const char* const kCurve[] = {"-newkey", "ec", "-pkeyopt",
                              "ec_paramgen_curve:prime256v1", "-nodes"};

// Runs openssl with `args`; INTERNAL with its output if it fails.
absl::Status Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), TestPki::Binary());
  absl::StatusOr<ProcessResult> r = RunProcess(args, {}, kOpensslTimeout);
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(absl::StrJoin(args, " "), ": ", r->Describe()));
}

// openssl writes keys as its umask says: make them private.
absl::Status MakePrivate(const std::string& path) {
  if (chmod(path.c_str(), 0600) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("chmod 600 ", path, " failed"));
}

std::vector<std::string> WithCurve(std::vector<std::string> args) {
  args.insert(args.end(), std::begin(kCurve), std::end(kCurve));
  return args;
}

}  // namespace

std::string TestPki::Binary() {
  const char* env = std::getenv("FERRY_OPENSSL");
  return env != nullptr ? env : "/usr/bin/openssl";
}

bool TestPki::Installed() { return access(Binary().c_str(), X_OK) == 0; }

std::string TestPki::SkipReason() {
  return absl::StrCat(Binary(),
                      " is not installed (apt-get install openssl, or set "
                      "FERRY_OPENSSL)");
}

TestPki::TestPki(std::string dir, std::string ca_file, std::string ca_key_file)
    : dir_(std::move(dir)),
      ca_file_(std::move(ca_file)),
      ca_key_file_(std::move(ca_key_file)) {}

absl::StatusOr<TestPki> TestPki::Create(const std::string& dir) {
  mkdir(dir.c_str(), 0700);
  TestPki pki(dir, absl::StrCat(dir, "/ca.pem"), absl::StrCat(dir, "/ca.key"));
  absl::Status made = Openssl(
      WithCurve({"req", "-x509", "-days", "2", "-subj", "/CN=ferry test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,keyCertSign,cRLSign", "-keyout",
                 pki.ca_key_file_, "-out", pki.ca_file_}));
  if (!made.ok()) return made;
  if (absl::Status s = MakePrivate(pki.ca_key_file_); !s.ok()) return s;
  return pki;
}

absl::StatusOr<CertFiles> TestPki::Issue(
    const std::string& name, const std::vector<std::string>& sans) const {
  const std::string base = absl::StrCat(dir_, "/", name);
  CertFiles files{absl::StrCat(base, ".pem"), absl::StrCat(base, ".key")};
  const std::string csr = absl::StrCat(base, ".csr");
  const std::string extensions = absl::StrCat(base, ".ext");
  std::vector<std::string> names = sans;
  names.push_back("IP:127.0.0.1");
  {
    std::ofstream out(extensions, std::ios::trunc);
    out << "basicConstraints = CA:FALSE\n"
        << "keyUsage = critical, digitalSignature, keyAgreement\n"
        << "extendedKeyUsage = serverAuth, clientAuth\n"
        << "subjectAltName = " << absl::StrJoin(names, ", ") << "\n";
    if (!out) {
      return absl::InternalError(absl::StrCat("cannot write ", extensions));
    }
  }
  absl::Status s =
      Openssl(WithCurve({"req", "-new", "-subj", absl::StrCat("/CN=", name),
                         "-keyout", files.key_file, "-out", csr}));
  if (!s.ok()) return s;
  if (s = MakePrivate(files.key_file); !s.ok()) return s;
  s = Openssl({"x509", "-req", "-days", "2", "-in", csr, "-CA", ca_file_,
               "-CAkey", ca_key_file_, "-CAcreateserial", "-CAserial",
               absl::StrCat(dir_, "/ca.srl"), "-extfile", extensions, "-out",
               files.cert_file});
  if (!s.ok()) return s;
  return files;
}

}  // namespace testing
}  // namespace ferry
