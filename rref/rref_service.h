// The owner's side of the RRef protocol as a gRPC service (proto/rref.proto)
// over the worker's owner table. Parked requests (AddFork before creation,
// Fetch before the value) hold no thread; a cancelled one is answered
// CANCELLED at once.
#ifndef FERRY_RREF_RREF_SERVICE_H_
#define FERRY_RREF_RREF_SERVICE_H_

#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/rref.grpc.pb.h"

namespace ferry {

class RRefContext;

class RRefService final : public proto::RRefs::CallbackService {
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
  // Runs `work` (which answers the request), through the context's owner
  // hook if a test set one (to delay or reorder one message).
  void Handle(absl::string_view method,
              const google::protobuf::Message& request,
              absl::AnyInvocable<void() &&> work);
  absl::Status Renew(const proto::LeaseRequest& request,
                     proto::LeaseResponse* response);
  // Answers at once: the security check, then `work`.
  template <typename Work>
  grpc::ServerUnaryReactor* Immediate(grpc::CallbackServerContext* context,
                                      Work work);

  RRefContext* const context_;
};

}  // namespace ferry

#endif  // FERRY_RREF_RREF_SERVICE_H_
