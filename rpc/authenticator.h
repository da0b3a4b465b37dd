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
//
// A 100 MB request without the token is refused on its headers: the server
// never buffers its body.
#ifndef FERRY_RPC_AUTHENTICATOR_H_
#define FERRY_RPC_AUTHENTICATOR_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/server_context.h"

namespace ferry {

inline constexpr char kCredentialHeader[] = "ferry-credential";

// SHA-256 of a node credential, hex: what membership publishes, so peers
// can check a credential without being able to present it.
std::string CredentialDigest(const std::string& credential);
// A fresh random credential (256 bits, hex).
std::string NewCredential();

class Authenticator final : public grpc::AuthMetadataProcessor {
 public:
  // `token`: required on every call ("" = none required).
  explicit Authenticator(std::string token);

  // Runs inline on gRPC's thread: a map lookup, never blocks.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* response) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Node `node`'s credential has `digest` from now on (a new incarnation
  // replaces the old one's).
  void Admit(uint64_t node, const std::string& digest) ABSL_LOCKS_EXCLUDED(mu_);
  // Node `node`'s credential no longer names it (it died or left).
  void Forget(uint64_t node) ABSL_LOCKS_EXCLUDED(mu_);

  // The node whose credential the call presented, if it presented a known
  // one.
  std::optional<uint64_t> NodeOf(const grpc::ServerContextBase& call) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string expected_;  // "Bearer <token>", or "" if none.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, uint64_t> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::string> digests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_AUTHENTICATOR_H_
