#include "rpc/auth/authenticator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "rpc/auth/cert_identity.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

constexpr char kAuthorization[] = "authorization";
// Probes (load balancers, orchestrators) ask without the job's secret.
constexpr char kHealthPrefix[] = "/grpc.health.v1.Health/";

constexpr uint64_t kFirstClient = uint64_t{1} << 32;
// Client ids are issued in ranges of 2^32: the master's is the first,
// worker k's read-only range the (k+1)th; etcd's start at 2^52
// (rpc/membership/etcd_job_keys.h), above every issuer's.
constexpr int kRangeBits = 32;
constexpr uint64_t kIssuedLimit = uint64_t{1} << 52;

absl::string_view Find(const grpc::AuthMetadataProcessor::InputMetadata& md,
                       absl::string_view key) {
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// How a departed client's credential is remembered among the gone.
std::string ClientMark(uint64_t node) { return absl::StrCat("c", node); }

bool IsWorker(uint64_t node) { return node < kFirstClient; }

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat(
      "the call's node credential ", why,
      " (it left, was declared dead or replaced, or the credential is "
      "forged or was made for another node)"));
}

}  // namespace

std::string IdentityLabel(uint64_t node) {
  return node < kFirstClient ? absl::StrCat("worker", node)
                             : absl::StrCat("client node ", node);
}

std::optional<uint64_t> ClientIssuer(uint64_t node) {
  if (node < kFirstClient || node >= kIssuedLimit) return std::nullopt;
  return (node >> kRangeBits) - 1;
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
      name_(std::move(options.name)),
      master_announces_clients_(options.master_announces_clients),
      self_(options.self),
      key_(options.key != nullptr ? options.key : NodeKey::Generate()),
      clients_end_(kFirstClient) {}

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

grpc::Status Authenticator::AwaitNewcomer(absl::string_view header) const {
  if (header.empty()) return grpc::Status::OK;
  // A newcomer's first calls may overtake the watch event that admits it.
  // This runs on gRPC's auth thread pool (IsBlocking), which grows: the
  // wait never holds a thread that runs callbacks, such as the watch's
  // that brings the key. (Waiting in a handler did: a few such calls took
  // every callback thread, and the key never came.)
  std::optional<PresentedCredential> c = ParseCredential(header);
  if (c.has_value() && Resolve(*c, /*wait=*/true).has_value()) {
    return grpc::Status::OK;
  }
  return grpc::Status(
      grpc::StatusCode::UNAUTHENTICATED,
      std::string(
          Unauthenticated(c.has_value() ? "names no live node" : "is malformed")
              .message()));
}

std::optional<Authenticator::Peer> Authenticator::MakePeer(
    uint64_t node, const std::string& public_key) const {
  absl::StatusOr<std::string> secret = key_->Agree(public_key);
  if (!secret.ok()) return std::nullopt;
  Peer peer{public_key, *secret, "", ""};
  peer.expected =
      CallToken(*secret, {node, public_key}, {self_, key_->public_key()});
  peer.header = FormatCredential({.node = node, .token = peer.expected});
  return peer;
}

void Authenticator::Admit(uint64_t node, const std::string& public_key) {
  // The pair secret is an ECDH: made here, off the calls' path and lock.
  std::optional<Peer> peer = MakePeer(node, public_key);
  if (!peer.has_value()) return;
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = peers_.try_emplace(node);
  if (!fresh && it->second.public_key != public_key) {
    // A client is one key for life (a record rewritten later moves no
    // identity); a worker's new incarnation replaces the old one's.
    if (!IsWorker(node)) return;
    RetireLocked(it->second.expected);
  }
  it->second = *std::move(peer);
  vouched_.erase(node);
  if (master_announces_clients_ && ClientIssuer(node) == uint64_t{0}) {
    clients_end_ = std::max(clients_end_, node + 1);
  }
  for (LateWait* wait : late_waits_) {
    if (wait->node == node) wait->arrived = true;
  }
}

void Authenticator::Forget(uint64_t node) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(node);
  if (it != peers_.end()) {
    RetireLocked(it->second.expected);
    peers_.erase(it);
  }
  vouched_.erase(node);
  if (!IsWorker(node)) RetireLocked(ClientMark(node));
}

void Authenticator::SetClientsEnd(uint64_t end) {
  absl::MutexLock lock(&mu_);
  clients_end_ = std::max(clients_end_, end);
}

void Authenticator::RetireLocked(std::string mark) {
  if (!gone_.insert(mark).second) return;
  gone_order_.push_back(std::move(mark));
  if (gone_order_.size() > kRememberedGone) {
    gone_.erase(gone_order_.front());
    gone_order_.pop_front();
  }
}

bool Authenticator::RetiredLocked(const PresentedCredential& c) const {
  return gone_.contains(c.token) ||
         (!IsWorker(c.node) && gone_.contains(ClientMark(c.node)));
}

void Authenticator::SetLearned() {
  absl::MutexLock lock(&mu_);
  learned_ = true;
  joined_.store(true);
}

bool Authenticator::VouchedLocked(const PresentedCredential& c) const {
  std::optional<uint64_t> issuer = ClientIssuer(c.node);
  if (!issuer.has_value() || c.voucher.empty()) return false;
  auto it = peers_.find(*issuer);
  if (it == peers_.end()) return false;
  const std::string tag =
      VoucherTag(it->second.secret, {*issuer, it->second.public_key},
                 {self_, key_->public_key()}, {c.node, c.public_key});
  return ConstantTimeEquals(tag, c.voucher);
}

const Authenticator::Peer* Authenticator::FindLocked(uint64_t node) const {
  if (auto it = peers_.find(node); it != peers_.end()) return &it->second;
  if (auto v = vouched_.find(node); v != vouched_.end()) return &v->second;
  return nullptr;
}

Authenticator::Lookup Authenticator::LookupLocked(
    const PresentedCredential& c) const {
  if (const Peer* known = FindLocked(c.node); known != nullptr) {
    if (ConstantTimeEquals(known->expected, c.token)) return Lookup::kKnown;
    return RetiredLocked(c) ? Lookup::kGone : Lookup::kWrong;
  }
  if (RetiredLocked(c)) return Lookup::kGone;
  // The master announces its clients in order: an id below the last one
  // announced that is not known left (or never was issued).
  if (master_announces_clients_ && ClientIssuer(c.node) == uint64_t{0} &&
      c.node < clients_end_) {
    return Lookup::kGone;
  }
  if (VouchedLocked(c)) return Lookup::kVouched;
  return Lookup::kUnknown;
}

bool Authenticator::AwaitLocked(uint64_t node, Lookup lookup) const {
  // Before joining, Process waited already (AwaitJoin): handlers never
  // wait for the job to form. The wait is for a real event a moment away,
  // so it is short and in real time.
  if (!learned_) return false;
  const absl::Time deadline = absl::Now() + kLearnWait;
  // A newcomer's first call may overtake the watch event that admits it: a
  // node not known, or a worker rank whose new incarnation is not.
  const bool newcomer = lookup == Lookup::kUnknown ||
                        (lookup == Lookup::kWrong && IsWorker(node));
  if (!late_admits_ || !newcomer || late_waits_.size() >= kMaxLateWaits) {
    return false;
  }
  LateWait wait{node};
  late_waits_.push_back(&wait);
  mu_.AwaitWithDeadline(absl::Condition(&wait.arrived), deadline);
  late_waits_.erase(std::find(late_waits_.begin(), late_waits_.end(), &wait));
  return wait.arrived;
}

std::optional<uint64_t> Authenticator::Resolve(const PresentedCredential& c,
                                               bool wait) const {
  {
    absl::MutexLock lock(&mu_);
    Lookup lookup = LookupLocked(c);
    if (wait && (lookup == Lookup::kUnknown || lookup == Lookup::kWrong) &&
        AwaitLocked(c.node, lookup)) {
      lookup = LookupLocked(c);
    }
    if (lookup == Lookup::kKnown) return c.node;
    if (lookup != Lookup::kVouched) return std::nullopt;
  }
  // A client its issuer vouches for, not announced here yet: its pair
  // secret (an ECDH) outside the lock, then it is known.
  std::optional<Peer> peer = MakePeer(c.node, c.public_key);
  if (!peer.has_value() || !ConstantTimeEquals(peer->expected, c.token)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  // Its announcement may have arrived meanwhile (then it is known: the
  // check above is the same check), or it may have left.
  const Lookup now = LookupLocked(c);
  if (now == Lookup::kKnown) return c.node;
  if (now != Lookup::kVouched) return std::nullopt;
  const bool announced =
      master_announces_clients_ && ClientIssuer(c.node) == uint64_t{0};
  if (announced) {
    peers_[c.node] = *std::move(peer);
  } else {
    // Never announced, never leaving: kept in a bounded cache only.
    if (vouched_.size() >= kMaxVouched) vouched_.clear();
    vouched_[c.node] = *std::move(peer);
  }
  return c.node;
}

size_t Authenticator::late_waits() const {
  absl::MutexLock lock(&mu_);
  return late_waits_.size();
}

std::optional<uint64_t> Authenticator::NodeOf(
    const grpc::ServerContextBase& call) const {
  absl::StatusOr<std::optional<uint64_t>> node = CallerNode(call);
  if (!node.ok()) return std::nullopt;
  return *node;
}

std::optional<uint64_t> Authenticator::KnownHeader(
    absl::string_view header) const {
  // "v1.<node>.<token>": the node's digits find the entry; the whole
  // header, compared in constant time, must be the one it presents.
  if (!absl::ConsumePrefix(&header, "v1.")) return std::nullopt;
  const size_t dot = header.find('.');
  uint64_t node;
  if (dot == absl::string_view::npos ||
      !absl::SimpleAtoi(header.substr(0, dot), &node)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  const Peer* known = FindLocked(node);
  if (known == nullptr) return std::nullopt;
  absl::string_view expected = known->header;
  expected.remove_prefix(3);  // "v1."
  if (!ConstantTimeEquals(header, expected)) return std::nullopt;
  return node;
}

absl::StatusOr<std::optional<uint64_t>> Authenticator::CallerNode(
    const grpc::ServerContextBase& call) const {
  const auto& metadata = call.client_metadata();
  auto it = metadata.find(kCredentialHeader);
  if (it == metadata.end()) return std::optional<uint64_t>();
  absl::StatusOr<std::optional<uint64_t>> node =
      NodeOfHeader(absl::string_view(it->second.data(), it->second.size()));
  // A worker's credential counts only with its rank's certificate.
  if (cert_identity_ && node.ok() && node->has_value() && IsWorker(**node)) {
    FERRY_RETURN_IF_ERROR(
        CheckWorkerCert(PeerCertNames(call), **node, "node credential"));
  }
  return node;
}

absl::StatusOr<std::optional<uint64_t>> Authenticator::NodeOfHeader(
    absl::string_view header) const {
  std::optional<uint64_t> node = KnownHeader(header);
  if (node.has_value()) return node;
  std::optional<PresentedCredential> c = ParseCredential(header);
  if (!c.has_value()) return Unauthenticated("is malformed");
  // With late_admits, Process waited already.
  node = Resolve(*c, /*wait=*/!late_admits_);
  if (node.has_value()) return node;
  return Unresolved(*c);
}

absl::StatusOr<std::optional<uint64_t>> Authenticator::Unresolved(
    const PresentedCredential& c) const {
  absl::MutexLock lock(&mu_);
  if (!learned_) {
    // Not joined yet: no key is known here. Process waited for the Join
    // answer (or refused the call); without Process (an --insecure job)
    // claims are believed, and nothing waits.
    if (!processes_metadata_) return std::optional<uint64_t>();
    return absl::UnavailableError(
        "this worker has not joined the job yet, so it knows no node "
        "key; retry");
  }
  // An --insecure job on etcd: a sender not learned yet proves nobody,
  // and claims are believed there anyway (one known gone is refused).
  if (late_admits_ && !processes_metadata_ &&
      LookupLocked(c) == Lookup::kUnknown) {
    return std::optional<uint64_t>();
  }
  return Unauthenticated("names no live node");
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
