// absl::Status <-> grpc::Status: codes map 1:1, messages are kept.
#ifndef FERRY_RPC_WIRE_GRPC_STATUS_H_
#define FERRY_RPC_WIRE_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace ferry {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_GRPC_STATUS_H_
