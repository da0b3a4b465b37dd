#include "rpc/auth/cert_identity.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"

namespace ferry {

namespace {

constexpr char kWorkerPrefix[] = "worker";

}  // namespace

std::vector<std::string> PeerCertNames(const grpc::ServerContextBase& call) {
  std::vector<std::string> names;
  std::shared_ptr<const grpc::AuthContext> auth = call.auth_context();
  if (auth == nullptr) return names;
  // gRPC lists a verified peer certificate's DNS and URI subjectAltNames
  // separately from its IP addresses and e-mail names, which never name a
  // worker (matching them could let a certificate for host 10.0.0.2 pass as
  // a worker called "10.0.0.2").
  for (const char* property :
       {GRPC_PEER_DNS_PROPERTY_NAME, GRPC_PEER_URI_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      names.emplace_back(value.data(), value.size());
    }
  }
  return names;
}

absl::Status CheckNameFitsRank(absl::string_view name, int rank) {
  absl::string_view digits = name;
  int named_rank = -1;
  if (!absl::ConsumePrefix(&digits, kWorkerPrefix) ||
      !absl::SimpleAtoi(digits, &named_rank) ||
      absl::StrCat(kWorkerPrefix, named_rank) != name || named_rank == rank) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("the name ", name, " belongs to rank ", named_rank,
                   ", not to rank ", rank, " (--tls_identity=san)"));
}

absl::Status CheckWorkerCert(const std::vector<std::string>& names,
                             uint64_t node, absl::string_view what) {
  const std::string wanted = absl::StrCat(kWorkerPrefix, node);
  if (std::find(names.begin(), names.end(), wanted) != names.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      what, ": the caller is ", wanted, " but its TLS certificate names ",
      names.empty() ? "no DNS name or URI"
                    : absl::StrCat("only ", absl::StrJoin(names, ", ")),
      " (--tls_identity=san: rank ", node, "'s certificate names ", wanted,
      ")"));
}

}  // namespace ferry
