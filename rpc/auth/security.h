// Transport security: who can connect to a node and what may be sent to
// whom. One of four modes, chosen by SecurityOptions:
//
//   mutual TLS            every peer presents a certificate signed by the CA
//                         (a token may be required on top);
//   server TLS + token    servers prove themselves by certificate, callers
//                         by the job's token;
//   local + token         no TLS: servers listen only on loopback or unix
//                         sockets with gRPC's local credentials (only this
//                         host's processes can connect) and every call
//                         carries the token (or none is required);
//   insecure              plaintext on any address, no token (--insecure).
//
// A token travels as "authorization: Bearer <token>" metadata, and only
// where it cannot be read on the way: over TLS, to a loopback address or to
// a unix socket. Servers check it (and the caller's node credential, see
// rpc/auth/authenticator.h) before a request's body is read.
#ifndef FERRY_RPC_AUTH_SECURITY_H_
#define FERRY_RPC_AUTH_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "rpc/auth/security_options.h"

namespace ferry {

class Security {
 public:
  // Reads the files. INVALID_ARGUMENT names a missing or unreadable file,
  // an incomplete TLS set, an empty token, server-authenticated TLS
  // without a token, --tls_identity=san without mutual TLS, or --insecure
  // with any TLS flag or a token (which it would ignore);
  // PERMISSION_DENIED a key or token file that group or others may read.
  static absl::StatusOr<std::shared_ptr<const Security>> Load(
      const SecurityOptions& options);
  // Local mode without a token (in-process jobs, tests).
  static std::shared_ptr<const Security> Insecure();

  // Whether a server may listen on `host` (a bind host, e.g. "0.0.0.0"):
  // a host other hosts can reach needs TLS, or --insecure.
  // FAILED_PRECONDITION naming the three choices.
  absl::Status CheckServe(absl::string_view host) const;

  // Credentials for a listening `address` ("host:port" or "unix…:name"),
  // with `processor` deciding on each call before its body is read (not in
  // insecure mode, which checks nothing).
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
      absl::string_view address,
      std::shared_ptr<grpc::AuthMetadataProcessor> processor) const;

  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // Adds what channels need (TLS name override).
  void ConfigureChannel(grpc::ChannelArguments* args) const;
  // Whether secrets (the token, a node's credential) may be sent to
  // `target` (a gRPC target): over TLS, to a unix socket, or to a target
  // whose every address is loopback (IsLoopbackTarget, by address: not
  // "127.0.0.1.example.com", not "ipv4:127.0.0.1:1,10.0.0.5:80").
  bool MaySendSecrets(absl::string_view target) const;

  // The token to send and to require ("" if none).
  const std::string& token() const { return token_; }
  bool tls() const { return !ca_.empty(); }
  // Workers are bound to certificates naming them (--tls_identity=san).
  bool cert_identity() const { return cert_identity_; }
  bool has_token() const { return !token_.empty(); }
  bool insecure() const { return insecure_; }

 private:
  bool tls_server() const { return !cert_.empty(); }

  std::string cert_, key_, ca_, server_name_, token_;
  bool client_certs_ = true;
  bool cert_identity_ = false;
  bool insecure_ = false;
};

// --tls_identity's value: "none" (or "") or "san"; INVALID_ARGUMENT
// naming the choices otherwise.
absl::StatusOr<TlsIdentity> ParseTlsIdentity(absl::string_view flag);

// Reads a secret (token or key) file: INVALID_ARGUMENT if it cannot be
// read, PERMISSION_DENIED if group or others may read it. `flag` names it
// in errors ("--token_file").
absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag);

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_SECURITY_H_
