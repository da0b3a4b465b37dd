// What a call presents as its sender's identity: the metadata
// "ferry-credential", set once per channel (rpc/channels.h) and checked
// by the Authenticator (rpc/auth/authenticator.h) before the body is read.
//
//   v1.<node>.<token>                      a worker's, or a known client's
//   v1.<node>.<token>.<public>.<voucher>   a client's, with what its issuer
//                                          (the node that registered it)
//                                          vouches to this destination
//
// <node> is decimal; the rest lowercase hex of kTokenBytes /
// kPublicKeyBytes. <token> is CallToken(sender → destination)
// (rpc/auth/node_key.h): bound to both nodes and both incarnations' keys, so
// the header is worth nothing anywhere but at the destination it was made
// for. The voucher lets a worker check a client it has not heard of yet
// (its registration still on the way) without being able to make such a
// voucher for any other worker.
#ifndef FERRY_RPC_AUTH_CREDENTIAL_H_
#define FERRY_RPC_AUTH_CREDENTIAL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace ferry {

inline constexpr char kCredentialHeader[] = "ferry-credential";

struct PresentedCredential {
  uint64_t node = 0;
  std::string token;       // kTokenBytes raw.
  std::string public_key;  // kPublicKeyBytes raw, or "" (no voucher).
  std::string voucher;     // kTokenBytes raw, or "".
};

// The header's value.
std::string FormatCredential(const PresentedCredential& credential);

// The credential in `header`, if it is well formed (lengths checked before
// anything is decoded); nullopt otherwise.
std::optional<PresentedCredential> ParseCredential(absl::string_view header);

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_CREDENTIAL_H_
