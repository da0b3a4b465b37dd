#include "rpc/authenticator.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/cert_identity.h"

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

constexpr uint64_t kFirstClient = uint64_t{1} << 32;

std::string ClientMac(const std::string& key, uint64_t node) {
  const std::string message = absl::StrCat("ferry client ", node);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
       mac, &size);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), size));
}

// The node a client credential ("c<node>.<mac>") claims, if well formed.
std::optional<uint64_t> ClaimedClient(absl::string_view credential) {
  if (!absl::ConsumePrefix(&credential, "c")) return std::nullopt;
  size_t dot = credential.find('.');
  uint64_t node = 0;
  if (dot == absl::string_view::npos ||
      !absl::SimpleAtoi(credential.substr(0, dot), &node) ||
      node < kFirstClient) {
    return std::nullopt;
  }
  return node;
}

}  // namespace

std::string ClientCredential(const std::string& key, uint64_t node) {
  return absl::StrCat("c", node, ".", ClientMac(key, node));
}

std::string IdentityLabel(uint64_t node) {
  return node < kFirstClient ? absl::StrCat("worker", node)
                             : absl::StrCat("client node ", node);
}

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

Authenticator::Authenticator(AuthenticatorOptions options)
    : expected_(options.token.empty() ? ""
                                      : absl::StrCat("Bearer ", options.token)),
      require_identity_(options.require_identity),
      late_admits_(options.late_admits),
      cert_identity_(options.cert_identity),
      processes_metadata_(options.processes_metadata),
      prejoin_calls_(std::move(options.prejoin_calls)),
      prejoin_wait_(options.prejoin_wait),
      name_(std::move(options.name)) {}

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
  const absl::string_view credential = Find(metadata, kCredentialHeader);
  // A credential means nothing here before the Join answer: wait for it
  // (here, off the callback threads), so no handler has to.
  if (!credential.empty() && !joined_.load()) {
    if (grpc::Status s = AwaitJoin(); !s.ok()) return s;
  }
  if (late_admits_) return AwaitNewcomer(credential);
  return grpc::Status::OK;
}

grpc::Status Authenticator::AwaitJoin() const {
  const int64_t wait_ms = absl::ToInt64Milliseconds(prejoin_wait_);
  if (prejoin_calls_ != nullptr && !prejoin_calls_->TryTake()) {
    const int64_t max = prejoin_calls_->max();
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat(
            name_, ": this worker has not joined the job yet and ",
            prejoin_calls_->used(), " calls already wait for it, ",
            LimitNote(absl::StrCat(max, " calls"), "max_prejoin_calls", max),
            "; retry"));
  }
  bool joined;
  {
    // The wait is for a real event a moment away (the job forming): real
    // time, like gRPC's own deadlines.
    absl::MutexLock lock(&mu_);
    joined = mu_.AwaitWithTimeout(absl::Condition(&learned_), prejoin_wait_);
  }
  if (prejoin_calls_ != nullptr) prejoin_calls_->Give();
  if (joined) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat(
          name_, ": this worker did not join the job within ", wait_ms,
          " ms of the call's arrival, ",
          LimitNote(absl::StrCat(wait_ms, " ms"), "prejoin_wait_ms", wait_ms),
          "; retry"));
}

grpc::Status Authenticator::AwaitNewcomer(absl::string_view credential) const {
  if (credential.empty()) return grpc::Status::OK;
  // A newcomer's first calls may overtake the watch event that admits it.
  // This runs on gRPC's auth thread pool (IsBlocking), which grows: the
  // wait never holds a thread that runs callbacks, such as the watch's
  // that brings the credential. (Waiting in a handler did: a few such
  // calls took every callback thread, and the credential never came.)
  const std::string digest = CredentialDigest(std::string(credential));
  absl::MutexLock lock(&mu_);
  if (ResolveLocked(credential, digest).has_value() ||
      AwaitLocked(credential, digest).has_value()) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "the call's node credential names no live node of this "
                      "job (it left, was declared dead, or is forged)");
}

void Authenticator::Admit(uint64_t node, const std::string& digest) {
  absl::MutexLock lock(&mu_);
  auto old = digests_.find(node);
  if (old != digests_.end() && old->second != digest) {
    nodes_.erase(old->second);
    RetireLocked(old->second);
  }
  digests_[node] = digest;
  nodes_[digest] = node;
  for (LateWait* wait : late_waits_) {
    if (*wait->digest == digest) wait->arrived = true;
  }
}

void Authenticator::Forget(uint64_t node) {
  absl::MutexLock lock(&mu_);
  auto it = digests_.find(node);
  if (it != digests_.end()) {
    nodes_.erase(it->second);
    RetireLocked(std::move(it->second));
    digests_.erase(it);
  }
  if (node < kFirstClient) return;
  // Client credentials the master issued are checked by their MAC, which
  // stays valid: remember the departed.
  if (!revoked_.insert(node).second) return;
  revoked_order_.push_back(node);
  if (revoked_order_.size() > kRevokedClients) {
    revoked_.erase(revoked_order_.front());
    revoked_order_.pop_front();
  }
}

void Authenticator::RetireLocked(std::string digest) {
  if (!gone_.insert(digest).second) return;
  gone_order_.push_back(std::move(digest));
  if (gone_order_.size() > kRevokedClients) {
    gone_.erase(gone_order_.front());
    gone_order_.pop_front();
  }
}

void Authenticator::SetClientKey(std::string key) {
  absl::MutexLock lock(&mu_);
  client_key_ = std::move(key);
  learned_ = true;
  joined_.store(true);
}

std::optional<uint64_t> Authenticator::ResolveLocked(
    absl::string_view credential, const std::string& digest) const {
  if (std::optional<uint64_t> client = ClaimedClient(credential)) {
    if (client_key_.empty() || revoked_.contains(*client)) return std::nullopt;
    if (!ConstantTimeEquals(credential,
                            ClientCredential(client_key_, *client))) {
      return std::nullopt;
    }
    return client;
  }
  auto node = nodes_.find(digest);
  if (node == nodes_.end()) return std::nullopt;
  return node->second;
}

size_t Authenticator::late_waits() const {
  absl::MutexLock lock(&mu_);
  return late_waits_.size();
}

std::optional<uint64_t> Authenticator::AwaitLocked(
    absl::string_view credential, const std::string& digest) const {
  // The wait is for a real event a moment away, so it is short and in real
  // time. (Before joining, Process waited already: AwaitJoin.)
  const absl::Time deadline = absl::Now() + kLearnWait;
  // A newcomer's first call may overtake the watch event that admits it;
  // a departed node's late call is no newcomer's.
  if (!learned_ || !late_admits_ || late_waits_.size() >= kMaxLateWaits ||
      gone_.contains(digest)) {
    return std::nullopt;
  }
  LateWait wait{&digest};
  late_waits_.push_back(&wait);
  mu_.AwaitWithDeadline(absl::Condition(&wait.arrived), deadline);
  late_waits_.erase(std::find(late_waits_.begin(), late_waits_.end(), &wait));
  return ResolveLocked(credential, digest);
}

std::optional<uint64_t> Authenticator::NodeOf(
    const grpc::ServerContextBase& call) const {
  absl::StatusOr<std::optional<uint64_t>> node = CallerNode(call);
  if (!node.ok()) return std::nullopt;
  return *node;
}

absl::StatusOr<std::optional<uint64_t>> Authenticator::CallerNode(
    const grpc::ServerContextBase& call) const {
  const auto& metadata = call.client_metadata();
  auto it = metadata.find(kCredentialHeader);
  if (it == metadata.end()) return std::optional<uint64_t>();
  absl::string_view credential(it->second.data(), it->second.size());
  const std::string digest = CredentialDigest(std::string(credential));
  std::optional<uint64_t> node;
  {
    absl::MutexLock lock(&mu_);
    node = ResolveLocked(credential, digest);
    if (!node.has_value() && !learned_) {
      // Not joined yet: no credential is known here. Process waited for
      // the Join answer (or refused the call); without Process (an
      // --insecure job) claims are believed, and nothing waits.
      if (!processes_metadata_) return std::optional<uint64_t>();
      return absl::UnavailableError(
          "this worker has not joined the job yet, so it knows no node "
          "credential; retry");
    }
    if (!node.has_value() && !processes_metadata_ && late_admits_ &&
        !gone_.contains(digest)) {
      // An --insecure job on etcd: a credential not learned yet proves
      // nobody, and claims are believed there anyway (one of a departed
      // node is still refused). With Process, it waited already.
      return std::optional<uint64_t>();
    }
  }
  if (!node.has_value()) {
    return absl::UnauthenticatedError(
        "the call's node credential names no live node of this job (it "
        "left, was declared dead, or the credential is forged)");
  }
  // A worker's credential counts only with its rank's certificate.
  if (cert_identity_ && *node < kFirstClient) {
    FERRY_RETURN_IF_ERROR(
        CheckWorkerCert(PeerCertNames(call), *node, "node credential"));
  }
  return node;
}

absl::Status Authenticator::CheckClaim(const std::optional<uint64_t>& caller,
                                       absl::string_view field,
                                       uint64_t claimed) const {
  if (caller.has_value()) {
    if (*caller == claimed) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat(field, " claims ", IdentityLabel(claimed),
                     " but the call's credential is ", IdentityLabel(*caller)));
  }
  if (!require_identity_) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(field, " claims ", IdentityLabel(claimed),
                   " but the call presented no node credential"));
}

absl::Status Authenticator::CheckClient(const std::optional<uint64_t>& caller,
                                        absl::string_view what) const {
  if (caller.has_value() ? *caller >= kFirstClient : !require_identity_) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(what, " is for clients only; the caller is ",
                   caller.has_value() ? IdentityLabel(*caller)
                                      : "anonymous (no credential)"));
}

}  // namespace ferry
