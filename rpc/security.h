// Transport security: optional mutual TLS and an optional shared-secret
// token. With TLS every peer presents a certificate signed by the CA; with a
// token every request carries "authorization: Bearer <token>" and servers
// refuse others with UNAUTHENTICATED (checked by every ferry handler; the
// standard health and reflection services stay open).
#ifndef FERRY_RPC_SECURITY_H_
#define FERRY_RPC_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "rpc/security_options.h"

namespace ferry {

class Security {
 public:
  // Reads the files. INVALID_ARGUMENT names a missing/unreadable file or an
  // incomplete TLS triple.
  static absl::StatusOr<std::shared_ptr<const Security>> Load(
      const SecurityOptions& options);
  // Plaintext, no token.
  static std::shared_ptr<const Security> Insecure();

  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // Adds what channels need (TLS name override).
  void ConfigureChannel(grpc::ChannelArguments* args) const;

  // The token to send ("" if none); channels attach it to every call.
  const std::string& token() const { return token_; }
  // OK, or UNAUTHENTICATED if a token is required and absent or wrong.
  grpc::Status Check(const grpc::ServerContextBase& context) const;

  bool tls() const { return !cert_.empty(); }
  bool has_token() const { return !token_.empty(); }

 private:
  std::string cert_, key_, ca_, server_name_, token_;
};

}  // namespace ferry

#endif  // FERRY_RPC_SECURITY_H_
