// The owner's side of the RRef protocol as a gRPC service (proto/rref.proto):
// each request, with the node its credential proves, goes to the owner's
// OwnerEndpoint (rref/owner_endpoint.h has the rules of who may ask what).
// Parked requests (AddFork before creation, Fetch before the value) hold
// no thread; a cancelled one is answered CANCELLED at once.
#ifndef FERRY_RREF_RREF_SERVICE_H_
#define FERRY_RREF_RREF_SERVICE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "proto/rref.grpc.pb.h"
#include "rpc/wire/bounded_service.h"
#include "rref/owner_endpoint.h"

namespace ferry {

class RRefContext;

// Every request is parsed through BoundedParse within the host's limits.
class RRefService final : public BoundedService<proto::RRefs::CallbackService> {
 public:
  explicit RRefService(RRefContext* context);

  grpc::ServerUnaryReactor* AddFork(grpc::CallbackServerContext* context,
                                    const proto::ForkRequest* request,
                                    proto::ForkResponse* response) override;
  grpc::ServerUnaryReactor* ConfirmFork(grpc::CallbackServerContext* context,
                                        const proto::ForkRequest* request,
                                        proto::ForkResponse* response) override;
  grpc::ServerUnaryReactor* DeleteFork(grpc::CallbackServerContext* context,
                                       const proto::ForkRequest* request,
                                       proto::ForkResponse* response) override;
  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* context,
                                  const proto::ForkRequest* request,
                                  proto::FetchResponse* response) override;
  grpc::ServerUnaryReactor* RenewLease(grpc::CallbackServerContext* context,
                                       const proto::LeaseRequest* request,
                                       proto::LeaseResponse* response) override;
  grpc::ServerUnaryReactor* ListOwned(
      grpc::CallbackServerContext* context,
      const proto::ListOwnedRequest* request,
      proto::ListOwnedResponse* response) override;

 private:
  // The node the call proved it is (nullopt: none, or no authenticator).
  absl::StatusOr<std::optional<uint64_t>> Caller(
      const grpc::CallbackServerContext& context) const;
  // A parked request's latest end: the caller's deadline, within the
  // context's default timeout.
  absl::Time Deadline(const grpc::CallbackServerContext& context) const;

  RRefContext* const context_;
  OwnerEndpoint endpoint_;
};

}  // namespace ferry

#endif  // FERRY_RREF_RREF_SERVICE_H_
