// What the master's rendezvous service shares between the files of its
// RPCs (rendezvous_service.cc: held calls, events, sweeps; rendezvous_join,
// _clients, _poll, _barrier: one RPC each, all under the one mutex): the
// gRPC form of a held call and the small helpers every RPC uses. Only
// those files include it.
#ifndef FERRY_RPC_MEMBERSHIP_RENDEZVOUS_INTERNAL_H_
#define FERRY_RPC_MEMBERSHIP_RENDEZVOUS_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "rpc/auth/cert_identity.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limit_errors.h"
#include "rpc/membership/rendezvous_service.h"

namespace ferry {

// A gRPC call: the reactor is the held call; gRPC deletes it once done.
class RendezvousService::GrpcHeld final : public Held,
                                          public grpc::ServerUnaryReactor {
 public:
  explicit GrpcHeld(RendezvousService* service) : service_(service) {}

  void Answer(const grpc::Status& status) override { Finish(status); }
  void OnCancel() override { service_->Cancel(this); }
  void OnDone() override { delete this; }

 private:
  RendezvousService* const service_;
};

namespace rendezvous_internal {

inline constexpr int64_t kDefaultWaitMs = 60000;
inline constexpr int64_t kMaxPollHoldMs = 5000;

inline grpc::Status Error(grpc::StatusCode code, std::string message) {
  return grpc::Status(code, std::move(message));
}

// RESOURCE_EXHAUSTED "<what>, over the limit of N (--flag=N)".
inline grpc::Status Exhausted(absl::string_view what, absl::string_view flag,
                              int64_t limit) {
  return Error(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      std::string(OverLimit(what, absl::StrCat(limit), flag, limit).message()));
}

// A caller's timeout, in [1 ms, kMaxHoldMs]; `fallback` if none.
inline int64_t HoldMs(int64_t asked, int64_t fallback) {
  return std::clamp<int64_t>(asked > 0 ? asked : fallback, 1,
                             RendezvousService::kMaxHoldMs);
}

inline std::string Cut(const std::string& text) {
  if (text.size() <= RendezvousService::kMaxNameBytes) return text;
  size_t n = RendezvousService::kMaxNameBytes;
  // Not inside a UTF-8 sequence (the name goes back out in protos).
  while (n > 0 && (static_cast<uint8_t>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// What the master sees of a gRPC call besides its message.
inline RendezvousService::Caller CallerOf(
    const grpc::CallbackServerContext& context, bool cert_identity) {
  RendezvousService::Caller caller;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kCredentialHeader); it != metadata.end()) {
    caller.credential.emplace(it->second.data(), it->second.size());
  }
  if (cert_identity) caller.cert_names = PeerCertNames(context);
  caller.peer = context.peer();
  return caller;
}

// A random incarnation for a client: its polls cannot be guessed.
inline uint64_t RandomIncarnation() { return RandomU64() | 1; }

// The pair secret of the master and the holder of `public_key` (an ECDH:
// made before the lock is taken); INVALID_ARGUMENT naming `field` for a
// key that yields none.
inline absl::StatusOr<std::string> SecretWith(const NodeKey& key,
                                              const std::string& public_key,
                                              absl::string_view field) {
  absl::StatusOr<std::string> secret = key.Agree(public_key);
  if (secret.ok()) return secret;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", secret.status().message()));
}

}  // namespace rendezvous_internal

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_RENDEZVOUS_INTERNAL_H_
