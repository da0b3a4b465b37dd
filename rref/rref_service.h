// The owner's side of the RRef protocol as a gRPC service (proto/rref.proto)
// over the worker's owner table. Parked requests (AddFork before creation,
// Fetch before the value) hold no thread; a cancelled one is answered
// CANCELLED at once.
//
// Who may ask what (with the host's authenticator; the caller is the node
// its credential proves, rpc/auth/authenticator.h). A refusal is
// PERMISSION_DENIED naming the field and both nodes, and changes nothing:
//   AddFork      only for a fork the caller made (fork_creator), by a
//                node holding a copy of the RRef here (it passes its copy
//                on); before the RRef exists, only by its creator;
//   ConfirmFork  only by the fork's holder (holder);
//   DeleteFork   only by the fork's holder; an abandon (only_unconfirmed)
//                also by the fork's sender (fork_creator); a fork not
//                registered (yet) only by its creator — anyone else's
//                delete of it is a no-op;
//   Fetch        only with a fork the caller holds (holder), never with
//                the owner's own null fork; before the RRef exists, only
//                the creator with its own ids (remote()'s to_here);
//   RenewLease   only for the caller's own lease (holder), vouching only
//                for copies in transit that the holder made (each
//                in_transit entry's fork_creator is the holder);
//   ListOwned    only for clients (ferryctl), not other workers.
#ifndef FERRY_RREF_RREF_SERVICE_H_
#define FERRY_RREF_RREF_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/rref.grpc.pb.h"
#include "rpc/wire/bounded_service.h"

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
  // The node the call proved it is (nullopt: none, or no authenticator).
  absl::StatusOr<std::optional<uint64_t>> Caller(
      const grpc::CallbackServerContext& context) const;
  // OK if `caller` may name `claimed` in `field` (always without an
  // authenticator).
  absl::Status Claim(const std::optional<uint64_t>& caller,
                     absl::string_view field, uint64_t claimed) const;
  // The rules above for each request; OK to go on.
  absl::Status MayDelete(const std::optional<uint64_t>& caller,
                         const proto::ForkRequest& r, bool* no_op) const;
  absl::Status MayAddFork(const std::optional<uint64_t>& caller,
                          const proto::ForkRequest& r) const;
  absl::Status MayFetch(const std::optional<uint64_t>& caller,
                        const proto::ForkRequest& r) const;
  absl::Status MayRenew(const std::optional<uint64_t>& caller,
                        const proto::LeaseRequest& r) const;

  RRefContext* const context_;
};

}  // namespace ferry

#endif  // FERRY_RREF_RREF_SERVICE_H_
