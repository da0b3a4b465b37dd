// A rank bound to its TLS certificate (ferryd --tls_identity=san): under
// mutual TLS every node presents a client certificate signed by the job's
// CA, and rank N's worker presents one naming "worker<N>" (its default
// name) as a subjectAltName DNS name or URI (e.g. DNS:worker2). Then the
// master admits a Join for rank N, and every receiver a call made with
// rank N's credential, only over a connection whose certificate names
// worker<N>: holding the CA-signed certificate of one worker, or of a
// client, is no right to another rank or identity. A worker's --name may
// be anything else, but a name "worker<M>" belongs to rank M only.
//
// Clients (ferryctl, ferry::Client) are not bound: any certificate the CA
// signed lets a node register as a client, under a client identity.
#ifndef FERRY_RPC_AUTH_CERT_IDENTITY_H_
#define FERRY_RPC_AUTH_CERT_IDENTITY_H_

#include <cstdint>
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
// "worker<M>" only for rank M. PERMISSION_DENIED naming both otherwise.
absl::Status CheckNameFitsRank(absl::string_view name, int rank);

// OK if a client certificate holding `cert_names` (PeerCertNames) names
// worker node `node` ("worker<node>"); PERMISSION_DENIED naming `what`,
// the worker and the certificate's names otherwise.
absl::Status CheckWorkerCert(const std::vector<std::string>& cert_names,
                             uint64_t node, absl::string_view what);

}  // namespace ferry

#endif  // FERRY_RPC_AUTH_CERT_IDENTITY_H_
