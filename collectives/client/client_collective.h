// Driving a collective from outside the job (ferryctl, tests, notebooks):
// the client sends each worker its input, the workers run the op together,
// and the client gathers their outputs.
//
//   request  = {"ranks": [input of rank 0, …], "timeout_ms": 5000, "op": "sum"}
//   response = {"ranks": [output of rank 0, …]}
//
// `null` in "ranks" means that rank does not take part (its output is null;
// the others then fail naming it). "group": [ranks…] runs the op on those
// ranks only (the others' inputs must be null). Every other key is the op's
// parameters.
#ifndef FERRY_COLLECTIVES_CLIENT_CLIENT_COLLECTIVE_H_
#define FERRY_COLLECTIVES_CLIENT_CLIENT_COLLECTIVE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/client.h"
#include "rpc/value/value.h"

namespace ferry {

// INVALID_ARGUMENT for a malformed request (naming the field). If the op
// fails, the error every rank reports (the lowest rank's), without the RPC
// layer's "workerN: ferry.collective:" prefix.
absl::StatusOr<Value> RunCollectiveFromClient(RpcClient& client,
                                              absl::string_view op,
                                              const Value& request);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_CLIENT_CLIENT_COLLECTIVE_H_
