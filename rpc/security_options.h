// What a node's transport security is made of: files, read by Security
// (rpc/security.h). A plain struct, so the public API can carry it without
// pulling in gRPC.
#ifndef FERRY_RPC_SECURITY_OPTIONS_H_
#define FERRY_RPC_SECURITY_OPTIONS_H_

#include <string>

namespace ferry {

struct SecurityOptions {
  // All three or none: PEM files for this process and the trusted CA.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // Name to expect in peers' certificates instead of the dialled host
  // (handy when certificates name a service, not an address).
  std::string tls_server_name;
  // A file whose content (trimmed) is the shared secret.
  std::string token_file;
};

}  // namespace ferry

#endif  // FERRY_RPC_SECURITY_OPTIONS_H_
