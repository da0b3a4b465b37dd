// What a node's transport security is made of: files and a mode, read by
// Security (rpc/auth/security.h). A plain struct, so the public API can carry
// it without pulling in gRPC.
#ifndef FERRY_RPC_AUTH_SECURITY_OPTIONS_H_
#define FERRY_RPC_AUTH_SECURITY_OPTIONS_H_

#include <string>

namespace ferry {

// What proves a worker's identity besides the credential membership gave
// it (rpc/auth/authenticator.h).
enum class TlsIdentity {
  kNone,  // Nothing more.
  // Under mutual TLS, a client certificate naming the worker
  // (rpc/auth/cert_identity.h): --tls_identity=san.
  kSan,
};

struct SecurityOptions {
  // PEM files: this node's certificate and key, and the CA peers' must be
  // signed by. Servers need all three; a client with only the CA checks
  // the servers (server-authenticated TLS) and proves itself by the token.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // Name to expect in peers' certificates instead of the dialled host
  // (handy when certificates name a service, not an address).
  std::string tls_server_name;
  // With TLS, whether servers require a client certificate (mutual TLS).
  // false: server-authenticated TLS, where a token is required.
  bool tls_client_certs = true;
  // kSan: a worker's Join and calls count only over a connection whose
  // client certificate names it. Needs mutual TLS.
  TlsIdentity tls_identity = TlsIdentity::kNone;
  // A file whose content (trimmed) is the job's secret token: the right to
  // join the job and to call it. Must not be readable by group or others.
  std::string token_file;
  // Serve and dial plaintext on any address, with no token and no identity
  // checks: only for networks where every host is trusted. Refused with
  // any TLS file, name or identity, or a token file.
  bool insecure = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_SECURITY_OPTIONS_H_
