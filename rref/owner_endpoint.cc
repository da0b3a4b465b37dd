#include "rref/owner_endpoint.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/status_util.h"
#include "rref/lease_chunks.h"
#include "rref/rref_context.h"

namespace ferry {

namespace {

GlobalId RRefOf(const proto::ForkRequest& r) {
  return {r.rref_creator(), r.rref_local()};
}
GlobalId ForkOf(const proto::ForkRequest& r) {
  return {r.fork_creator(), r.fork_local()};
}

std::pair<GlobalId, GlobalId> PairOf(const proto::RRefHandle& h) {
  return {{h.rref_creator(), h.rref_local()},
          {h.fork_creator(), h.fork_local()}};
}

}  // namespace

OwnerEndpoint::OwnerEndpoint(RRefContext* context) : context_(context) {}

absl::Status OwnerEndpoint::Claim(const std::optional<uint64_t>& caller,
                                  absl::string_view field,
                                  uint64_t claimed) const {
  const Authenticator* auth = context_->host().authenticator;
  if (auth == nullptr) return absl::OkStatus();
  return auth->CheckClaim(caller, field, claimed);
}

absl::Status OwnerEndpoint::MayDelete(const std::optional<uint64_t>& caller,
                                      const proto::ForkRequest& r,
                                      bool* no_op) const {
  *no_op = false;
  OwnerTable::ForkOwnership fork =
      context_->owner_table()->Ownership(RRefOf(r), ForkOf(r));
  if (!fork.holder.has_value()) {
    // Not registered: a delete that overtook its fork's registration (only
    // its creator can send one), or a late one. Another's changes nothing.
    if (Claim(caller, "fork_creator", r.fork_creator()).ok()) {
      return absl::OkStatus();
    }
    *no_op = true;
    return absl::OkStatus();
  }
  // The sender of an unconfirmed fork may abandon it (its call failed).
  if (r.only_unconfirmed() &&
      Claim(caller, "fork_creator", r.fork_creator()).ok()) {
    return absl::OkStatus();
  }
  return Annotate(
      Claim(caller, "the fork's holder", *fork.holder),
      absl::StrCat("DeleteFork of copy ", GlobalIdString(ForkOf(r))));
}

absl::Status OwnerEndpoint::MayAddFork(const std::optional<uint64_t>& caller,
                                       const proto::ForkRequest& r) const {
  FERRY_RETURN_IF_ERROR(Claim(caller, "fork_creator", r.fork_creator()));
  // No credential, and none required (an --insecure job): claims believed.
  if (!caller.has_value()) return absl::OkStatus();
  OwnerTable* table = context_->owner_table();
  OwnerTable::ForkOwnership rref = table->Ownership(RRefOf(r), ForkOf(r));
  if (rref.gone) return absl::OkStatus();  // The table answers NOT_FOUND.
  // Not created yet: its creator passes copies on while its remote() call
  // is on the way (the AddFork waits for it); nobody else holds one yet.
  if (!rref.known) {
    return Annotate(Claim(caller, "rref_creator", r.rref_creator()),
                    "AddFork before the rref exists");
  }
  // A copy is registered by the node passing on a copy it holds (G2: the
  // parent's fork stays registered until this AddFork is answered), never
  // by a node that holds none: it could then fetch any value whose id it
  // guessed.
  if (table->HoldsCopy(RRefOf(r), *caller)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "AddFork: ", IdentityLabel(*caller), " holds no copy of rref ",
      GlobalIdString(RRefOf(r)), " here; only a holder passes one on"));
}

absl::Status OwnerEndpoint::MayFetch(const std::optional<uint64_t>& caller,
                                     const proto::ForkRequest& r) const {
  FERRY_RETURN_IF_ERROR(Claim(caller, "holder", r.holder()));
  const Authenticator* auth = context_->host().authenticator;
  if (auth == nullptr) return absl::OkStatus();
  if (ForkOf(r) == GlobalId{} &&
      (caller.has_value() || auth->require_identity())) {
    return absl::PermissionDeniedError(
        "Fetch: a null fork fetches the owner's own copy; a peer must name "
        "a copy it holds");
  }
  OwnerTable::ForkOwnership fork =
      context_->owner_table()->Ownership(RRefOf(r), ForkOf(r));
  if (fork.holder.has_value()) {
    return Annotate(
        Claim(caller, "the fork's holder", *fork.holder),
        absl::StrCat("Fetch with copy ", GlobalIdString(ForkOf(r))));
  }
  // Known or freed: the table answers (NOT_FOUND). Not created yet: a
  // fetch would wait for it, so only its creator, with its own ids.
  if (fork.known || fork.gone) return absl::OkStatus();
  FERRY_RETURN_IF_ERROR(Claim(caller, "rref_creator", r.rref_creator()));
  return Claim(caller, "fork_creator", r.fork_creator());
}

absl::Status OwnerEndpoint::MayRenew(const std::optional<uint64_t>& caller,
                                     const proto::LeaseRequest& r) const {
  FERRY_RETURN_IF_ERROR(Claim(caller, "holder", r.holder()));
  // A holder lists in transit only copies it sent, and it made their ids
  // (fork ids are (creator, counter); AddFork registers a fork only for its
  // creator). Another node's entry would keep that node's unconfirmed copy
  // alive past its own sender's word, so the renewal is refused whole and
  // changes nothing (not even the lease). Ignoring the entry would do too,
  // but no honest holder ever sends one: a refusal costs no honest renewal
  // (they are retried each period anyway) and shows the forgery.
  for (int i = 0; i < r.in_transit_size(); ++i) {
    const proto::RRefHandle& h = r.in_transit(i);
    if (h.fork_creator() == r.holder()) continue;
    return absl::PermissionDeniedError(absl::StrCat(
        "RenewLease: in_transit[", i, "] is copy ",
        GlobalIdString({h.fork_creator(), h.fork_local()}), " of rref ",
        GlobalIdString({h.rref_creator(), h.rref_local()}), ", made by ",
        IdentityLabel(h.fork_creator()), "; ", IdentityLabel(r.holder()),
        " may vouch only for copies it sent"));
  }
  return absl::OkStatus();
}

void OwnerEndpoint::Handle(absl::string_view method,
                           const google::protobuf::Message& request,
                           absl::AnyInvocable<void() &&> work) {
  RRefContext::OwnerHook hook = context_->owner_hook();
  if (hook == nullptr) {
    std::move(work)();
    return;
  }
  hook(method, request, std::move(work));
}

absl::Status OwnerEndpoint::Renew(const proto::LeaseRequest& request,
                                  proto::LeaseResponse* response) {
  LeaseListing listing;
  listing.forks.reserve(request.forks_size());
  for (const proto::RRefHandle& h : request.forks()) {
    listing.forks.push_back(PairOf(h));
  }
  listing.in_transit.reserve(request.in_transit_size());
  for (const proto::RRefHandle& h : request.in_transit()) {
    listing.in_transit.push_back(PairOf(h));
  }
  listing.round = request.round();
  listing.chunk = request.chunk();
  listing.chunks = request.chunks();
  listing.epoch = request.epoch();
  absl::StatusOr<uint64_t> epoch =
      context_->owner_table()->RenewLease(request.holder(), listing);
  if (!epoch.ok()) return epoch.status();
  response->set_epoch(*epoch);
  response->set_lease_ms(
      absl::ToInt64Milliseconds(context_->owner_table()->options().lease));
  return absl::OkStatus();
}

void OwnerEndpoint::AddFork(std::optional<uint64_t> caller,
                            const proto::ForkRequest& r, absl::Time deadline,
                            const WaitSlot& wait, Answer answer) {
  absl::Status allowed = MayAddFork(caller, r);
  if (!allowed.ok()) return std::move(answer)(allowed);
  OwnerTable* table = context_->owner_table();
  Handle("AddFork", r,
         [table, wait, &r, deadline, answer = std::move(answer)]() mutable {
           wait->store(table->AddFork(RRefOf(r), ForkOf(r), r.holder(),
                                      deadline, std::move(answer)));
         });
}

void OwnerEndpoint::ConfirmFork(std::optional<uint64_t> caller,
                                const proto::ForkRequest& r, Answer answer) {
  absl::Status allowed = Claim(caller, "holder", r.holder());
  if (!allowed.ok()) return std::move(answer)(allowed);
  OwnerTable* table = context_->owner_table();
  Handle("ConfirmFork", r, [table, &r, answer = std::move(answer)]() mutable {
    std::move(answer)(
        table->ConfirmFork(RRefOf(r), ForkOf(r), r.holder(), r.round()));
  });
}

void OwnerEndpoint::DeleteFork(std::optional<uint64_t> caller,
                               const proto::ForkRequest& r, Answer answer) {
  bool no_op = false;
  absl::Status allowed = MayDelete(caller, r, &no_op);
  if (!allowed.ok() || no_op) return std::move(answer)(allowed);
  OwnerTable* table = context_->owner_table();
  Handle("DeleteFork", r, [table, &r, answer = std::move(answer)]() mutable {
    table->DeleteFork(RRefOf(r), ForkOf(r), r.only_unconfirmed());
    std::move(answer)(absl::OkStatus());
  });
}

void OwnerEndpoint::Fetch(std::optional<uint64_t> caller,
                          const proto::ForkRequest& r, absl::Time deadline,
                          proto::FetchResponse* response, const WaitSlot& wait,
                          Answer answer) {
  absl::Status allowed = MayFetch(caller, r);
  if (!allowed.ok()) return std::move(answer)(allowed);
  // RRefs inside the value are sent to the fetcher like any call's.
  std::shared_ptr<RRefCodec> codec = context_->ForPeer(r.holder());
  wait->store(context_->owner_table()->Fetch(
      RRefOf(r), ForkOf(r), deadline,
      [response, codec,
       answer = std::move(answer)](absl::StatusOr<Value> value) mutable {
        absl::Status s = value.status();
        if (s.ok()) {
          s = ValueToProto(*value, response->mutable_value(), codec.get());
        }
        if (!s.ok()) {
          codec->Abandon();
          return std::move(answer)(s);
        }
        codec->ReadyToSend().Then(
            [codec, answer = std::move(answer)](
                const absl::StatusOr<Done>& sent) mutable {
              if (!sent.ok()) codec->Abandon();
              std::move(answer)(sent.status());
            });
      }));
}

void OwnerEndpoint::RenewLease(std::optional<uint64_t> caller,
                               const proto::LeaseRequest& r,
                               proto::LeaseResponse* response, Answer answer) {
  absl::Status allowed = MayRenew(caller, r);
  if (!allowed.ok()) return std::move(answer)(allowed);
  Handle("RenewLease", r,
         [this, &r, response, answer = std::move(answer)]() mutable {
           std::move(answer)(Renew(r, response));
         });
}

absl::Status OwnerEndpoint::ListOwned(std::optional<uint64_t> caller,
                                      proto::ListOwnedResponse* response) {
  if (const Authenticator* auth = context_->host().authenticator) {
    FERRY_RETURN_IF_ERROR(auth->CheckClient(
        caller, absl::StrCat(context_->host().name, ": ListOwned")));
  }
  for (proto::OwnedRRef& r : context_->owner_table()->List()) {
    *response->add_rrefs() = std::move(r);
  }
  return absl::OkStatus();
}

bool OwnerEndpoint::Cancel(const WaitSlot& wait) {
  OwnerTable::WaitId id = wait->load();
  return id != 0 && context_->owner_table()->CancelWait(id);
}

}  // namespace ferry
