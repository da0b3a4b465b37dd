// A worker bound to its TLS certificate (ferryd --tls_identity=san): under
// mutual TLS every node presents a client certificate signed by the job's
// CA, and a worker's certificate names the worker, as a subjectAltName DNS
// name or URI equal to its name (e.g. DNS:worker2). Then the master admits
// a Join, and every receiver a call made with a worker's credential, only
// over a connection whose certificate names that worker. A name of the
// form "worker<N>" (the default names) belongs to rank N only, so a
// certificate for worker2 binds rank 2: holding the job's CA-signed
// certificate for one worker is no right to another's rank or identity.
//
// Clients (ferryctl, ferry::Client) are not bound: any certificate the CA
// signed lets a node register as a client, under a client identity.
#ifndef FERRY_RPC_CERT_IDENTITY_H_
#define FERRY_RPC_CERT_IDENTITY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace ferry {

// The subjectAltName DNS names and URIs of the call's client certificate,
// in the certificate's order; empty if the call presented none.
std::vector<std::string> PeerCertNames(const grpc::ServerContextBase& call);

// OK if `name` may be the name of rank `rank`'s worker: a name
// "worker<N>" only for rank N. PERMISSION_DENIED naming both otherwise.
absl::Status CheckNameFitsRank(absl::string_view name, int rank);

// OK if a client certificate holding `cert_names` (PeerCertNames) names
// worker `name` of rank `rank` (see CheckNameFitsRank); PERMISSION_DENIED
// naming `what`, the worker and the certificate's names otherwise.
absl::Status CheckWorkerCert(const std::vector<std::string>& cert_names,
                             int rank, absl::string_view name,
                             absl::string_view what);

}  // namespace ferry

#endif  // FERRY_RPC_CERT_IDENTITY_H_
