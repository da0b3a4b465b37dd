#include "rpc/security.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ferry {

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot read '", path, "'"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

constexpr char kAuthKey[] = "authorization";  // Lower case, as on the wire.

// Compares without leaking the position of the first difference.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Security>> Security::Load(
    const SecurityOptions& options) {
  auto s = std::make_shared<Security>();
  int tls_files = !options.tls_cert_file.empty() +
                  !options.tls_key_file.empty() + !options.tls_ca_file.empty();
  if (tls_files != 0 && tls_files != 3) {
    return absl::InvalidArgumentError(
        "TLS needs all of --tls_cert, --tls_key and --tls_ca");
  }
  if (tls_files == 3) {
    auto cert = ReadFile(options.tls_cert_file, "--tls_cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadFile(options.tls_key_file, "--tls_key");
    if (!key.ok()) return key.status();
    auto ca = ReadFile(options.tls_ca_file, "--tls_ca");
    if (!ca.ok()) return ca.status();
    s->cert_ = *cert;
    s->key_ = *key;
    s->ca_ = *ca;
    s->server_name_ = options.tls_server_name;
  }
  if (!options.token_file.empty()) {
    auto token = ReadFile(options.token_file, "--token_file");
    if (!token.ok()) return token.status();
    s->token_ = std::string(absl::StripAsciiWhitespace(*token));
    if (s->token_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file: '", options.token_file, "' is empty"));
    }
  }
  return std::shared_ptr<const Security>(std::move(s));
}

std::shared_ptr<const Security> Security::Insecure() {
  return std::make_shared<const Security>();
}

std::shared_ptr<grpc::ServerCredentials> Security::ServerCredentials() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = ca_;
  opts.pem_key_cert_pairs.push_back({key_, cert_});
  return grpc::SslServerCredentials(opts);
}

std::shared_ptr<grpc::ChannelCredentials> Security::ChannelCredentials() const {
  if (!tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ca_;
  opts.pem_private_key = key_;
  opts.pem_cert_chain = cert_;
  return grpc::SslCredentials(opts);
}

void Security::ConfigureChannel(grpc::ChannelArguments* args) const {
  if (tls() && !server_name_.empty()) {
    args->SetSslTargetNameOverride(server_name_);
  }
}

grpc::Status Security::Check(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthKey);
  if (it != metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    if (absl::ConsumePrefix(&value, "Bearer ") &&
        ConstantTimeEquals(value, token_)) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong token (see --token_file)");
}

}  // namespace ferry
