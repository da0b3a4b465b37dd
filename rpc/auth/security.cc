#include "rpc/auth/security.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "rpc/auth/net_util.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool IsUnixTarget(absl::string_view target) {
  return absl::StartsWith(target, "unix:") ||
         absl::StartsWith(target, "unix-abstract:");
}

// --insecure serves and dials plaintext with no checks: TLS files or a
// token given with it would be silently dropped, so the mix is refused.
absl::Status CheckInsecureAlone(const SecurityOptions& options) {
  if (!options.insecure) return absl::OkStatus();
  std::vector<std::string> given;
  if (!options.tls_cert_file.empty()) given.push_back("--tls_cert");
  if (!options.tls_key_file.empty()) given.push_back("--tls_key");
  if (!options.tls_ca_file.empty()) given.push_back("--tls_ca");
  if (!options.tls_server_name.empty()) given.push_back("--tls_server_name");
  if (options.tls_identity != TlsIdentity::kNone) {
    given.push_back("--tls_identity");
  }
  if (!options.token_file.empty()) given.push_back("--token_file");
  if (given.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--insecure (plaintext, no token, no identity checks) cannot be "
      "combined with ",
      absl::StrJoin(given, " "),
      ", which it would ignore: drop --insecure to use them, or drop them"));
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: '%s' may be read by group or others (mode %04o); make it "
        "private: chmod 600 '%s'",
        flag, path, st.st_mode & 07777, path));
  }
  return ReadFile(path, flag);
}

absl::StatusOr<std::shared_ptr<const Security>> Security::Load(
    const SecurityOptions& options) {
  FERRY_RETURN_IF_ERROR(CheckInsecureAlone(options));
  auto s = std::make_shared<Security>();
  s->insecure_ = options.insecure;
  s->client_certs_ = options.tls_client_certs;
  const bool cert = !options.tls_cert_file.empty();
  const bool key = !options.tls_key_file.empty();
  const bool ca = !options.tls_ca_file.empty();
  if (cert != key || ((cert || key) && !ca)) {
    return absl::InvalidArgumentError(
        "TLS needs --tls_cert, --tls_key and --tls_ca (or only --tls_ca, to "
        "check servers' certificates with a token as the caller's proof)");
  }
  if (ca) {
    FERRY_ASSIGN_OR_RETURN(s->ca_, ReadFile(options.tls_ca_file, "--tls_ca"));
  }
  if (cert) {
    FERRY_ASSIGN_OR_RETURN(s->cert_,
                           ReadFile(options.tls_cert_file, "--tls_cert"));
    FERRY_ASSIGN_OR_RETURN(s->key_,
                           ReadSecretFile(options.tls_key_file, "--tls_key"));
  }
  s->server_name_ = options.tls_server_name;
  if (!options.token_file.empty()) {
    FERRY_ASSIGN_OR_RETURN(std::string token,
                           ReadSecretFile(options.token_file, "--token_file"));
    s->token_ = std::string(absl::StripAsciiWhitespace(token));
    if (s->token_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file: '", options.token_file, "' is empty"));
    }
  }
  if (options.tls_identity == TlsIdentity::kSan &&
      (!cert || !options.tls_client_certs)) {
    return absl::InvalidArgumentError(
        "--tls_identity=san binds workers to their client certificates: it "
        "needs mutual TLS (--tls_cert --tls_key --tls_ca, "
        "--tls_client_certs=true)");
  }
  s->cert_identity_ = options.tls_identity == TlsIdentity::kSan;
  if (ca && (!cert || !options.tls_client_certs) && s->token_.empty()) {
    return absl::InvalidArgumentError(
        "server-authenticated TLS (no client certificate) needs a token "
        "(--token_file): otherwise anyone who reaches the port may call");
  }
  return std::shared_ptr<const Security>(std::move(s));
}

absl::StatusOr<TlsIdentity> ParseTlsIdentity(absl::string_view flag) {
  if (flag.empty() || flag == "none") return TlsIdentity::kNone;
  if (flag == "san") return TlsIdentity::kSan;
  return absl::InvalidArgumentError(absl::StrCat(
      "--tls_identity=", flag,
      ": expected none (the node credential alone) or san (a worker's "
      "client certificate must name it, as a DNS name or URI)"));
}

std::shared_ptr<const Security> Security::Insecure() {
  return std::make_shared<const Security>();
}

absl::Status Security::CheckServe(absl::string_view host) const {
  if (tls() && !tls_server()) {
    return absl::FailedPreconditionError(
        "a server needs --tls_cert and --tls_key besides --tls_ca");
  }
  if (tls() || insecure_ || IsLoopbackHost(host)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve on ", host,
      " (reachable from other hosts) in plaintext: use TLS (--tls_cert "
      "--tls_key --tls_ca, with --token_file for server-only TLS), listen "
      "on a loopback address (127.0.0.1) for a job on one host, or pass "
      "--insecure on a network where every host is trusted"));
}

std::shared_ptr<grpc::ServerCredentials> Security::ServerCredentials(
    absl::string_view address,
    std::shared_ptr<grpc::AuthMetadataProcessor> processor) const {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (insecure_) return grpc::InsecureServerCredentials();
  if (IsUnixTarget(address)) {
    // Local credentials: only this host's processes can connect. (The
    // plaintext kind cannot run an auth processor.)
    creds = grpc::experimental::LocalServerCredentials(UDS);
  } else if (tls()) {
    grpc::SslServerCredentialsOptions opts(
        client_certs_
            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    opts.pem_root_certs = ca_;
    opts.pem_key_cert_pairs.push_back({key_, cert_});
    creds = grpc::SslServerCredentials(opts);
  } else {
    creds = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  }
  if (processor != nullptr) creds->SetAuthMetadataProcessor(processor);
  return creds;
}

std::shared_ptr<grpc::ChannelCredentials> Security::ChannelCredentials() const {
  // Local servers accept plaintext clients; gRPC's local channel
  // credentials would add nothing but a check we make in MaySendSecrets.
  if (!tls() || insecure_) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ca_;
  if (client_certs_) {
    opts.pem_private_key = key_;
    opts.pem_cert_chain = cert_;
  }
  return grpc::SslCredentials(opts);
}

void Security::ConfigureChannel(grpc::ChannelArguments* args) const {
  if (tls() && !server_name_.empty()) {
    args->SetSslTargetNameOverride(server_name_);
  }
}

bool Security::MaySendSecrets(absl::string_view target) const {
  if (tls() && !insecure_) return true;
  return IsUnixTarget(target) || IsLoopbackTarget(target);
}

}  // namespace ferry
