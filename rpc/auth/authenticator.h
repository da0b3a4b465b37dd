// Authenticator: decides, from a call's metadata and before its body is
// read, whether the call may proceed, and which node sent it. One per
// server, installed on every listening port (Security::ServerCredentials),
// so no handler can forget it:
//
//   - the job's token ("authorization: Bearer <token>") is required on
//     every call when the node has one, except gRPC's health checks (open
//     for probes);
//   - a node credential ("ferry-credential", rpc/auth/credential.h) names the
//     sender: NodeOf(call) is the node that made it. It is a token derived
//     from the pair secret of the sender and this node (rpc/auth/node_key.h),
//     each known by the public key membership published for it, so it
//     proves the sender holds that node's private key and is worth nothing
//     at any other node: what a node collects from its callers it cannot
//     replay. (Not through the call's auth context: gRPC keeps properties
//     added there on the connection, for every later call.)
//
// Who is known (Admit): every worker of the directory and each replacement
// (its entry's key), every client the membership announced (the embedded
// master's REGISTERED events; etcd's client records), each by its node id.
// A client may call before its announcement arrived: its credential then
// carries its key and a voucher from the node that registered it (the
// master for ids it issues, worker k for its read-only clients), which only
// that node and this one can make; a voucher for a master-issued id below
// what the master already announced is refused (that client left).
// Revocation is not capped: a client that left (Forget) is no longer known,
// and on the embedded master every client id below the announced end is
// known or gone for good.
//
//   - on etcd, where nodes announce themselves in their records, peers
//     Admit keys as their watch delivers them (late_admits): a call whose
//     sender is not known yet waits a moment for it (kLearnWait at most,
//     kMaxLateWaits calls at once), since a client or replacement may call
//     before a peer's watch told it of the newcomer; one of a node known to
//     be gone is refused at once. The wait is in Process, on gRPC's auth
//     thread pool, before the body is read: every call of such a job takes
//     that thread hop.
//   - before this worker has joined the job (SetLearned), it knows no
//     key yet: a call presenting a credential waits in Process, on gRPC's
//     auth thread pool (IsBlocking() is true until then), never in a
//     handler, for the Join answer — at most `prejoin_calls` calls at once
//     (--max_prejoin_calls, shared with the calls the CallService parks)
//     and `prejoin_wait` each (--prejoin_wait_ms), UNAVAILABLE naming the
//     flag past either (retry: the job is forming). Handlers never wait
//     for it.
//   - with cert_identity (--tls_identity=san, rpc/auth/cert_identity.h) a
//     worker's credential counts only over a connection whose TLS client
//     certificate names that worker.
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
#ifndef FERRY_RPC_AUTH_AUTHENTICATOR_H_
#define FERRY_RPC_AUTH_AUTHENTICATOR_H_

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
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/quota.h"

namespace ferry {

// "worker2" for a worker node, "client node 4294967298" for a client's.
std::string IdentityLabel(uint64_t node);

// The worker that issues client id `node` and vouches for it (the master,
// 0, for the ids it hands out; worker k for its read-only range), or
// nullopt for ids nobody vouches for (etcd's, workers').
std::optional<uint64_t> ClientIssuer(uint64_t node);

struct AuthenticatorOptions {
  // Required on every call ("" = none required).
  std::string token;
  // A call that presented no credential may claim nobody (see above).
  bool require_identity = false;
  // Keys of nodes that come later reach this node by a watch, after their
  // first calls perhaps: an unknown sender waits for its Admit.
  bool late_admits = false;
  // A worker's credential counts only with a TLS certificate naming it.
  bool cert_identity = false;
  // Process() runs for every call: the server's credentials carry this
  // authenticator (every mode but --insecure, whose plaintext credentials
  // cannot run one). Without it, with late_admits, a sender not learned
  // yet counts as none (claims are believed in such a job).
  bool processes_metadata = true;
  // Calls that may wait at once for this worker to join the job
  // (--max_prejoin_calls), shared with the CallService's parked calls;
  // null: no bound. And how long each may wait (--prejoin_wait_ms).
  std::shared_ptr<Quota> prejoin_calls;
  absl::Duration prejoin_wait = absl::Seconds(5);
  // Names the worker in those errors ("worker1").
  std::string name = "this worker";
  // The embedded master announces every client it registers, in the
  // order of their ids: an id it issued below the last one announced is
  // a live client or one that left.
  bool master_announces_clients = false;
  // This node and its key pair: credentials are derived for them. A null
  // key: a fresh one (tests).
  uint64_t self = 0;
  std::shared_ptr<const NodeKey> key;
};

class Authenticator final : public grpc::AuthMetadataProcessor {
 public:
  // Nodes gone (a worker incarnation replaced or dead, a client on etcd
  // that left) whose credentials are refused at once rather than waited
  // for (late_admits): the last this many. Older ones are refused too,
  // after the wait, since nothing admits them again.
  static constexpr size_t kRememberedGone = 1024;
  // Read-only clients (vouched for by a worker other than the master,
  // never announced, never leaving) this node keeps checked; past it the
  // cache starts over and their next calls are checked again.
  static constexpr size_t kMaxVouched = 1024;
  // Longest a call waits for this worker to learn the job's keys, or
  // (late_admits) for a newcomer's.
  static constexpr absl::Duration kLearnWait = absl::Seconds(5);
  // Most calls waiting at once for a newcomer's key (late_admits); past
  // it an unknown sender is refused at once. Each wait holds a thread of
  // gRPC's auth pool, so a peer with the token and made-up credentials
  // can make the worker hold only this many.
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

  // Node `node` holds `public_key` from now on: a worker of the directory
  // or a new incarnation of one (the old incarnation's credentials name
  // nobody any more), a client announced by the membership. The pair
  // secret is derived here, off the calls' path. An unusable key is
  // ignored (its holder proves nothing).
  void Admit(uint64_t node, const std::string& public_key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Node `node` left or died: its credentials name nobody any more.
  void Forget(uint64_t node) ABSL_LOCKS_EXCLUDED(mu_);
  // The master has issued (and announced) every client id below `end`
  // (master_announces_clients): those not admitted left.
  void SetClientsEnd(uint64_t end) ABSL_LOCKS_EXCLUDED(mu_);
  // This worker has admitted the keys of its Join answer. Until then
  // CallerNode waits (kLearnWait at most) for an unknown sender rather
  // than refusing it: the job forms for every worker at once.
  void SetLearned() ABSL_LOCKS_EXCLUDED(mu_);

  // The node whose credential the call presented, if it presented a valid
  // one.
  std::optional<uint64_t> NodeOf(const grpc::ServerContextBase& call) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The node the call proved it is; nullopt if it presented no credential;
  // UNAUTHENTICATED if it presented one that names no live node (malformed,
  // forged, made for another node, or of a node that left or was
  // replaced); UNAVAILABLE if this worker has not joined the job yet (so
  // knows no key; an --insecure job then believes claims: nullopt). Never
  // waits for the join (Process did); PERMISSION_DENIED (cert_identity) if
  // it is a worker's over a
  // connection whose certificate does not name that worker.
  absl::StatusOr<std::optional<uint64_t>> CallerNode(
      const grpc::ServerContextBase& call) const ABSL_LOCKS_EXCLUDED(mu_);
  // What credential header `header` (a peer's bytes, any length) proves:
  // CallerNode's answer but for the certificate check, which needs the
  // call.
  absl::StatusOr<std::optional<uint64_t>> NodeOfHeader(
      absl::string_view header) const ABSL_LOCKS_EXCLUDED(mu_);
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
  // Calls waiting for a newcomer's key now (late_admits).
  size_t late_waits() const ABSL_LOCKS_EXCLUDED(mu_);
  const NodeKey& key() const { return *key_; }
  uint64_t self() const { return self_; }

 private:
  // A node known here: its key, the pair secret, and the token it
  // presents to this node.
  struct Peer {
    std::string public_key;
    std::string secret;
    std::string expected;
    // The credential header it presents here (FormatCredential of
    // `expected`): matched whole, a known sender costs no decoding.
    std::string header;
  };
  // What a presented credential is, as far as the tables tell.
  enum class Lookup { kKnown, kWrong, kUnknown, kGone, kVouched };
  // A call waiting for a newcomer's key (late_admits).
  struct LateWait {
    uint64_t node;
    bool arrived = false;
  };

  // The peer entry for `public_key` (its secret and expected token), or
  // nullopt for an unusable key. Expensive (ECDH): called outside mu_.
  std::optional<Peer> MakePeer(uint64_t node,
                               const std::string& public_key) const;
  // The entry of `node`, a worker's or a vouched client's; null if none.
  const Peer* FindLocked(uint64_t node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Lookup LookupLocked(const PresentedCredential& c) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node whose current header `header` is exactly, if any: the common
  // case of CallerNode, without parsing (anything else takes the parse).
  std::optional<uint64_t> KnownHeader(absl::string_view header) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // CallerNode's answer for a credential that resolved to no node.
  absl::StatusOr<std::optional<uint64_t>> Unresolved(
      const PresentedCredential& c) const ABSL_LOCKS_EXCLUDED(mu_);
  // OK once this worker joined the job (at once if it has), or
  // UNAVAILABLE naming --max_prejoin_calls or --prejoin_wait_ms. Blocks
  // (Process only).
  grpc::Status AwaitJoin() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `c`'s voucher is its issuer's to this node.
  bool VouchedLocked(const PresentedCredential& c) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node `c` proves, admitting a vouched client on the way; waits
  // (`wait`) for a sender that may be on its way.
  std::optional<uint64_t> Resolve(const PresentedCredential& c, bool wait) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits (kLearnWait at most, late_admits only, once joined) until
  // `node` was admitted; false if waiting is pointless.
  bool AwaitLocked(uint64_t node, Lookup lookup) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The credential of `c` (its node's entry) names nobody from now on.
  void RetireLocked(std::string mark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RetiredLocked(const PresentedCredential& c) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK if `header` ("" = none) names a known sender, or one that becomes
  // known within kLearnWait; else UNAUTHENTICATED. Blocks (Process,
  // late_admits only).
  grpc::Status AwaitNewcomer(absl::string_view header) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::string expected_;  // "Bearer <token>", or "" if none.
  const bool require_identity_;
  const bool late_admits_;
  const bool cert_identity_;
  const bool processes_metadata_;
  const std::shared_ptr<Quota> prejoin_calls_;
  const absl::Duration prejoin_wait_;
  const std::string name_;
  const bool master_announces_clients_;
  const uint64_t self_;
  const std::shared_ptr<const NodeKey> key_;
  // learned_, for IsBlocking without the lock.
  std::atomic<bool> joined_{false};

  mutable absl::Mutex mu_;
  bool learned_ ABSL_GUARDED_BY(mu_) = false;  // SetLearned was called.
  // Workers (their current incarnations) and clients announced or
  // vouched for by the master.
  mutable absl::flat_hash_map<uint64_t, Peer> peers_ ABSL_GUARDED_BY(mu_);
  // Read-only clients vouched for by another worker (kMaxVouched).
  mutable absl::flat_hash_map<uint64_t, Peer> vouched_ ABSL_GUARDED_BY(mu_);
  // master_announces_clients: every master-issued id below this was
  // announced (a live one is in peers_).
  uint64_t clients_end_ ABSL_GUARDED_BY(mu_);
  // Credentials of nodes gone (kRememberedGone): a worker's old token, a
  // client's node id; a late call presenting one is refused at once,
  // never waited for.
  absl::flat_hash_set<std::string> gone_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> gone_order_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<LateWait*> late_waits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_AUTHENTICATOR_H_
