// The owner's side of the RRef protocol (proto/rref.proto) over the
// worker's owner table, without a transport: what each request may do and
// what it does. RRefService (rref/rref_service.h) serves it over gRPC;
// tests call it in-process (tests/testing/fake_owners.h).
//
// Who may ask what (with the host's authenticator; `caller` is the node the
// request proved it is, rpc/auth/authenticator.h). A refusal is
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
//
// Every request is answered exactly once through its `answer` (a refusal
// at once, inside the call); AddFork and Fetch may wait in the table (for
// the RRef's creation, or its value) until `deadline`, and a waiting one
// can be cancelled through its WaitSlot. The request (and response) must
// stay valid until it is answered. Answers run outside the table's lock.
#ifndef FERRY_RREF_OWNER_ENDPOINT_H_
#define FERRY_RREF_OWNER_ENDPOINT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "proto/rref.pb.h"
#include "rref/owner_table.h"

namespace ferry {

class RRefContext;

class OwnerEndpoint {
 public:
  using Answer = absl::AnyInvocable<void(absl::Status) &&>;
  // Where a waiting request's wait id is stored once it waits (0 before).
  using WaitSlot = std::shared_ptr<std::atomic<OwnerTable::WaitId>>;
  // `context` is an owner's (it has an owner table) and outlives this.
  explicit OwnerEndpoint(RRefContext* context);

  void AddFork(std::optional<uint64_t> caller, const proto::ForkRequest& r,
               absl::Time deadline, const WaitSlot& wait, Answer answer);
  void ConfirmFork(std::optional<uint64_t> caller, const proto::ForkRequest& r,
                   Answer answer);
  void DeleteFork(std::optional<uint64_t> caller, const proto::ForkRequest& r,
                  Answer answer);
  // The value goes into `response`, RRefs inside it encoded for the holder.
  void Fetch(std::optional<uint64_t> caller, const proto::ForkRequest& r,
             absl::Time deadline, proto::FetchResponse* response,
             const WaitSlot& wait, Answer answer);
  void RenewLease(std::optional<uint64_t> caller, const proto::LeaseRequest& r,
                  proto::LeaseResponse* response, Answer answer);
  absl::Status ListOwned(std::optional<uint64_t> caller,
                         proto::ListOwnedResponse* response);

  // Ends a waiting request: true if it was still waiting (it is then not
  // answered; the caller answers it), false if it was answered already.
  bool Cancel(const WaitSlot& wait);

 private:
  // Runs `work` (which answers the request), through the context's owner
  // hook if a test set one (to delay or reorder one message).
  void Handle(absl::string_view method,
              const google::protobuf::Message& request,
              absl::AnyInvocable<void() &&> work);
  absl::Status Renew(const proto::LeaseRequest& request,
                     proto::LeaseResponse* response);
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

#endif  // FERRY_RREF_OWNER_ENDPOINT_H_
