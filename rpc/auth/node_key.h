// A node's key pair, and the secrets two nodes derive from theirs.
//
// Every node incarnation (a worker process, a client) makes an X25519 key
// pair when it starts. Membership publishes the public half (a worker's
// WorkerInfo.public_key, a client's registration or etcd record); the
// private half never leaves the process. Two nodes agree on a pair secret
// (ECDH) from their own private key and the other's public one, which no
// third node can compute, and derive from it (HKDF-SHA256, each with its
// own label and with both nodes and both keys in the derivation):
//
//   CallToken(from → to)  what node `from` presents on its calls to node
//                         `to` (rpc/auth/credential.h): worth nothing at any
//                         other node or incarnation, since they derive
//                         another one, so a node that collects what its
//                         callers present can replay it nowhere;
//   VoucherTag            what the node that registered a client (the
//                         master, or the worker a read-only client asked)
//                         tells worker `verifier` about it: that the
//                         client with this node id holds this public key.
//                         Only the issuer and that worker can make it.
//
//   std::shared_ptr<const NodeKey> mine = NodeKey::Generate();
//   absl::StatusOr<std::string> secret = mine->Agree(peer.public_key);
//   std::string token = CallToken(*secret, {me, mine->public_key()},
//                                 {peer.node, peer.public_key});
#ifndef FERRY_RPC_AUTH_NODE_KEY_H_
#define FERRY_RPC_AUTH_NODE_KEY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// X25519 public keys, pair secrets and derived tokens: 32 bytes each.
inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kTokenBytes = 32;

// A node id with the public key of its incarnation.
struct KeyedNode {
  uint64_t node = 0;
  absl::string_view public_key;
};

// What a client's issuer vouched for it to worker `rank`, which held
// `public_key` then (VoucherTag below).
struct Voucher {
  int rank = -1;
  std::string public_key;
  std::string tag;
};

class NodeKey {
 public:
  // A fresh key pair from OpenSSL's generator (seeded by the kernel; a
  // failure there means no key can be made, and aborts).
  static std::shared_ptr<const NodeKey> Generate();
  ~NodeKey();
  NodeKey(const NodeKey&) = delete;
  NodeKey& operator=(const NodeKey&) = delete;

  // The public half: kPublicKeyBytes raw bytes.
  const std::string& public_key() const { return public_key_; }

  // The pair secret with the holder of `peer_public` (kTokenBytes).
  // INVALID_ARGUMENT for a key that is not kPublicKeyBytes long or that
  // yields no secret (a low-order point, which would make the secret
  // known to anyone).
  absl::StatusOr<std::string> Agree(absl::string_view peer_public) const;

 private:
  struct Pkey;
  NodeKey(std::unique_ptr<Pkey> pkey, std::string public_key);

  const std::unique_ptr<Pkey> pkey_;
  const std::string public_key_;
};

// OK for a usable public key (see Agree); INVALID_ARGUMENT naming `what`.
absl::Status CheckPublicKey(absl::string_view public_key,
                            absl::string_view what);

// What `from` presents on its calls to `to`, from their pair `secret`
// (kTokenBytes).
std::string CallToken(absl::string_view secret, const KeyedNode& from,
                      const KeyedNode& to);

// What `issuer` tells `verifier` about `client`, from the issuer's and the
// verifier's pair `secret` (kTokenBytes).
std::string VoucherTag(absl::string_view secret, const KeyedNode& issuer,
                       const KeyedNode& verifier, const KeyedNode& client);

// Compares without leaking where the first difference is.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// From OpenSSL's generator (aborts if it cannot give any): a fresh secret
// of 256 bits as lowercase hex (job tokens), and 64 random bits that no
// peer can predict (incarnations, op ids).
std::string NewSecret();
uint64_t RandomU64();

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_NODE_KEY_H_
