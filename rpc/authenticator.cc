#include "rpc/authenticator.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

constexpr char kAuthorization[] = "authorization";
// Probes (load balancers, orchestrators) ask without the job's secret.
constexpr char kHealthPrefix[] = "/grpc.health.v1.Health/";

// Compares without leaking the position of the first difference.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

absl::string_view Find(const grpc::AuthMetadataProcessor::InputMetadata& md,
                       absl::string_view key) {
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

}  // namespace

std::string CredentialDigest(const std::string& credential) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(credential.data(), credential.size(), digest, &size, EVP_sha256(),
             nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), size));
}

std::string NewCredential() {
  unsigned char bytes[32];
  // OpenSSL's generator is seeded from the kernel; it fails only if the
  // kernel has no entropy to give, when a credential cannot be made.
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::abort();
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

Authenticator::Authenticator(std::string token)
    : expected_(token.empty() ? "" : absl::StrCat("Bearer ", token)) {}

grpc::Status Authenticator::Process(const InputMetadata& metadata,
                                    grpc::AuthContext* /*context*/,
                                    OutputMetadata* consumed,
                                    OutputMetadata* /*response*/) {
  if (absl::StartsWith(Find(metadata, ":path"), kHealthPrefix)) {
    return grpc::Status::OK;
  }
  if (!expected_.empty()) {
    if (!ConstantTimeEquals(Find(metadata, kAuthorization), expected_)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "missing or wrong job token (see --token_file)");
    }
    // Handlers never see the secret.
    consumed->insert({kAuthorization, expected_});
  }
  return grpc::Status::OK;
}

void Authenticator::Admit(uint64_t node, const std::string& digest) {
  absl::MutexLock lock(&mu_);
  auto old = digests_.find(node);
  if (old != digests_.end()) nodes_.erase(old->second);
  digests_[node] = digest;
  nodes_[digest] = node;
}

void Authenticator::Forget(uint64_t node) {
  absl::MutexLock lock(&mu_);
  auto it = digests_.find(node);
  if (it == digests_.end()) return;
  nodes_.erase(it->second);
  digests_.erase(it);
}

std::optional<uint64_t> Authenticator::NodeOf(
    const grpc::ServerContextBase& call) const {
  const auto& metadata = call.client_metadata();
  auto it = metadata.find(kCredentialHeader);
  if (it == metadata.end()) return std::nullopt;
  const std::string digest =
      CredentialDigest(std::string(it->second.data(), it->second.size()));
  absl::MutexLock lock(&mu_);
  auto node = nodes_.find(digest);
  if (node == nodes_.end()) return std::nullopt;
  return node->second;
}

}  // namespace ferry
