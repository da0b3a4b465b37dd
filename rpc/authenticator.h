// Authenticator: decides, from a call's metadata and before its body is
// read, whether the call may proceed, and which node sent it. One per
// server, installed on every listening port (Security::ServerCredentials),
// so no handler can forget it:
//
//   - the job's token ("authorization: Bearer <token>") is required on
//     every call when the node has one, except gRPC's health checks (open
//     for probes);
//   - a node credential ("ferry-credential: <secret>"), issued per node
//     incarnation by membership, names the sender: NodeOf(call) is the node
//     whose credential the call presented, which handlers compare with the
//     node a message claims to come from. (Not through the call's auth
//     context: gRPC keeps properties added there on the connection, for
//     every later call.)
//   - a client's credential is "c<node>.<mac>", the MAC keyed by the job's
//     client key (which the master hands to workers at Join, never to
//     clients): any worker can check it the moment the client registered,
//     without waiting for membership news, and a client can only be the
//     node it was registered as.
//
//   - on etcd, where no node issues credentials, each node makes its own
//     and publishes its digest in its membership record; peers Admit the
//     digests as their watch delivers them (late_admits): a call whose
//     credential is not known yet waits a moment for it (kLearnWait at
//     most, kMaxLateWaits calls at once), since a client or replacement
//     may call before a peer's watch told it of the newcomer; one of a
//     node that died or left is refused at once. The wait is in Process,
//     on gRPC's auth thread pool, before the body is read: every call of
//     such a job takes that thread hop.
//   - before this worker has joined the job (SetClientKey), it knows no
//     credential yet: a call presenting one waits in Process, on gRPC's
//     auth thread pool (IsBlocking() is true until then), never in a
//     handler, for the Join answer — at most `prejoin_calls` calls at once
//     (--max_prejoin_calls, shared with the calls the CallService parks)
//     and `prejoin_wait` each (--prejoin_wait_ms), UNAVAILABLE naming the
//     flag past either (retry: the job is forming). Handlers never wait.
//   - with cert_identity (--tls_identity=san, rpc/cert_identity.h) a
//     worker's credential counts only over a connection whose TLS client
//     certificate names that worker: a stolen credential is no use
//     without the worker's key too.
//
// Handlers resolve the caller once (CallerNode) and compare what a message
// claims (caller_node, holder, src, node) with it (CheckClaim). With
// `require_identity` (the job has a token or TLS) a call that presented no
// credential may claim nobody; without it (an --insecure job, where secrets
// are not sent) such claims are taken at their word, but a presented
// credential is still checked.
//
// A 100 MB request without the token is refused on its headers: the server
// never buffers its body.
#ifndef FERRY_RPC_AUTHENTICATOR_H_
#define FERRY_RPC_AUTHENTICATOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/server_context.h"
#include "rpc/base/quota.h"

namespace ferry {

inline constexpr char kCredentialHeader[] = "ferry-credential";

// SHA-256 of a node credential, hex: what membership publishes, so peers
// can check a credential without being able to present it.
std::string CredentialDigest(const std::string& credential);
// A fresh random credential (256 bits, hex).
std::string NewCredential();
// Client `node`'s credential under the job's client `key`.
std::string ClientCredential(const std::string& key, uint64_t node);
// "worker2" for a worker node, "client node 4294967298" for a client's.
std::string IdentityLabel(uint64_t node);

struct AuthenticatorOptions {
  // Required on every call ("" = none required).
  std::string token;
  // A call that presented no credential may claim nobody (see above).
  bool require_identity = false;
  // Credentials of nodes that come later reach this node by a watch, after
  // their first calls perhaps: an unknown credential waits for its Admit.
  bool late_admits = false;
  // A worker's credential counts only with a TLS certificate naming it.
  bool cert_identity = false;
  // Process() runs for every call: the server's credentials carry this
  // authenticator (every mode but --insecure, whose plaintext credentials
  // cannot run one). Without it, with late_admits, a credential not
  // learned yet counts as none (claims are believed in such a job).
  bool processes_metadata = true;
  // Calls that may wait at once for this worker to join the job
  // (--max_prejoin_calls), shared with the CallService's parked calls;
  // null: no bound. And how long each may wait (--prejoin_wait_ms).
  std::shared_ptr<Quota> prejoin_calls;
  absl::Duration prejoin_wait = absl::Seconds(5);
  // Names the worker in those errors ("worker1").
  std::string name = "this worker";
};

class Authenticator final : public grpc::AuthMetadataProcessor {
 public:
  // Clients forgotten (they left) are remembered this many at most: an
  // older one's credential, known only to that client, names it again.
  static constexpr size_t kRevokedClients = 1024;
  // Longest a call waits (late_admits) for a newcomer's credential.
  static constexpr absl::Duration kLearnWait = absl::Seconds(5);
  // Most calls waiting at once for a newcomer's credential (late_admits);
  // past it an unknown credential is refused at once. Each wait holds a
  // thread of gRPC's auth pool, so a peer with the token and made-up
  // credentials can make the worker hold only this many.
  static constexpr size_t kMaxLateWaits = 16;

  explicit Authenticator(AuthenticatorOptions options);
  explicit Authenticator(std::string token, bool require_identity = false)
      : Authenticator(AuthenticatorOptions{
            .token = std::move(token), .require_identity = require_identity}) {}

  // Inline on gRPC's thread (a map lookup) once joined, unless
  // late_admits: then, and before joining, on gRPC's auth thread pool,
  // where a call may wait for a credential without holding a thread that
  // runs callbacks. (gRPC asks for every call.)
  bool IsBlocking() const override { return late_admits_ || !joined_.load(); }
  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* response) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Node `node`'s credential has `digest` from now on (a new incarnation
  // replaces the old one's).
  void Admit(uint64_t node, const std::string& digest) ABSL_LOCKS_EXCLUDED(mu_);
  // Node `node`'s credential no longer names it (it died or left).
  void Forget(uint64_t node) ABSL_LOCKS_EXCLUDED(mu_);
  // The job's client key (from the master); client credentials are
  // refused until it is set. Called once the Join answer's credentials
  // were admitted: until then CallerNode waits (kLearnWait at most) for an
  // unknown credential rather than refusing it (in Process; see above).
  void SetClientKey(std::string key) ABSL_LOCKS_EXCLUDED(mu_);

  // The node whose credential the call presented, if it presented a known
  // one.
  std::optional<uint64_t> NodeOf(const grpc::ServerContextBase& call) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The node the call proved it is; nullopt if it presented no credential;
  // UNAUTHENTICATED if it presented one that names no live node;
  // UNAVAILABLE if this worker has not joined the job yet (so knows no
  // credential; an --insecure job then believes claims: nullopt). Never
  // waits (Process did);
  // PERMISSION_DENIED (cert_identity) if it is a worker's credential over a
  // connection whose certificate does not name that worker.
  absl::StatusOr<std::optional<uint64_t>> CallerNode(
      const grpc::ServerContextBase& call) const ABSL_LOCKS_EXCLUDED(mu_);
  // OK if a caller resolved to `caller` (by CallerNode) may send a message
  // whose `field` names node `claimed`; PERMISSION_DENIED naming the field
  // and both nodes if not.
  absl::Status CheckClaim(const std::optional<uint64_t>& caller,
                          absl::string_view field, uint64_t claimed) const;
  // OK for a caller resolved to a client (or, without require_identity, to
  // nobody); PERMISSION_DENIED naming `what` for workers and anonymous
  // callers.
  absl::Status CheckClient(const std::optional<uint64_t>& caller,
                           absl::string_view what) const;
  bool require_identity() const { return require_identity_; }
  // Calls waiting for a newcomer's credential now (late_admits).
  size_t late_waits() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A call waiting for a newcomer's credential (late_admits).
  struct LateWait {
    const std::string* digest;
    bool arrived = false;
  };

  // `digest` is the credential's (computed outside the lock).
  std::optional<uint64_t> ResolveLocked(absl::string_view credential,
                                        const std::string& digest) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK once this worker joined the job (at once if it has), or
  // UNAVAILABLE naming --max_prejoin_calls or --prejoin_wait_ms. Blocks
  // (Process only).
  grpc::Status AwaitJoin() const ABSL_LOCKS_EXCLUDED(mu_);
  // OK if `credential` ("" = none) is known, or becomes known within
  // kLearnWait; else UNAUTHENTICATED. Blocks (Process, late_admits only).
  grpc::Status AwaitNewcomer(absl::string_view credential) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits (kLearnWait at most, late_admits only) for a newcomer's
  // credential that may be on its way; the node it names if it came.
  std::optional<uint64_t> AwaitLocked(absl::string_view credential,
                                      const std::string& digest) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `digest` names nobody from now on.
  void RetireLocked(std::string digest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string expected_;  // "Bearer <token>", or "" if none.
  const bool require_identity_;
  const bool late_admits_;
  const bool cert_identity_;
  const bool processes_metadata_;
  const std::shared_ptr<Quota> prejoin_calls_;
  const absl::Duration prejoin_wait_;
  const std::string name_;
  // learned_, for IsBlocking without the lock.
  std::atomic<bool> joined_{false};
  mutable absl::Mutex mu_;
  std::string client_key_ ABSL_GUARDED_BY(mu_);
  bool learned_ ABSL_GUARDED_BY(mu_) = false;  // SetClientKey was called.
  absl::flat_hash_set<uint64_t> revoked_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> revoked_order_ ABSL_GUARDED_BY(mu_);
  // Digests that named a node which died, left or was replaced (the last
  // kRevokedClients): a late call presenting one is refused at once, never
  // waited for.
  absl::flat_hash_set<std::string> gone_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> gone_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::string> digests_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<LateWait*> late_waits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_AUTHENTICATOR_H_
