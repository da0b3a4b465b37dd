#include "rref/rref_service.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/clock.h"
#include "rpc/base/status_util.h"
#include "rpc/wire/grpc_status.h"
#include "rref/rref_context.h"

namespace ferry {

namespace {

GlobalId RRefOf(const proto::ForkRequest& r) {
  return {r.rref_creator(), r.rref_local()};
}
GlobalId ForkOf(const proto::ForkRequest& r) {
  return {r.fork_creator(), r.fork_local()};
}

// A reply that may wait in the owner table. Whoever gets to finish it
// first (the table's callback or a cancellation) does; the other does not.
// The wait id lives outside the reactor: the table may finish (and gRPC
// delete) the reactor before the id is even stored.
class ParkedReactor final : public grpc::ServerUnaryReactor {
 public:
  using WaitSlot = std::shared_ptr<std::atomic<OwnerTable::WaitId>>;
  ParkedReactor(OwnerTable* table, WaitSlot wait)
      : table_(table), wait_(std::move(wait)) {}
  void OnCancel() override {
    OwnerTable::WaitId id = wait_->load();
    if (id != 0 && table_->CancelWait(id)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
  }
  void OnDone() override { delete this; }

 private:
  OwnerTable* const table_;
  const WaitSlot wait_;
};

// Parked waits end by the caller's deadline (bounded even without one).
absl::Time WaitDeadline(const Clock& clock,
                        const grpc::CallbackServerContext* context,
                        absl::Duration fallback) {
  absl::Time d = FromWallDeadline(clock, context->deadline());
  return std::min(d, clock.Now() + fallback);
}

// Answers a refused request at once.
grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* context,
                                 const absl::Status& why) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(why));
  return reactor;
}

std::pair<GlobalId, GlobalId> PairOf(const proto::RRefHandle& h) {
  return {{h.rref_creator(), h.rref_local()},
          {h.fork_creator(), h.fork_local()}};
}

}  // namespace

RRefService::RRefService(RRefContext* context)
    : BoundedService(ServiceOf<proto::ForkRequest>("RRefs"),
                     context->host().limits, context->host().name),
      context_(context) {
  Bound(&RRefService::AddFork, "AddFork");
  Bound(&RRefService::ConfirmFork, "ConfirmFork");
  Bound(&RRefService::DeleteFork, "DeleteFork");
  Bound(&RRefService::Fetch, "Fetch");
  Bound(&RRefService::RenewLease, "RenewLease");
  Bound(&RRefService::ListOwned, "ListOwned");
}

absl::StatusOr<std::optional<uint64_t>> RRefService::Caller(
    const grpc::CallbackServerContext& context) const {
  const Authenticator* auth = context_->host().authenticator;
  if (auth == nullptr) return std::optional<uint64_t>();
  return auth->CallerNode(context);
}

absl::Status RRefService::Claim(const std::optional<uint64_t>& caller,
                                absl::string_view field,
                                uint64_t claimed) const {
  const Authenticator* auth = context_->host().authenticator;
  if (auth == nullptr) return absl::OkStatus();
  return auth->CheckClaim(caller, field, claimed);
}

absl::Status RRefService::MayDelete(const std::optional<uint64_t>& caller,
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

absl::Status RRefService::MayAddFork(const std::optional<uint64_t>& caller,
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

absl::Status RRefService::MayFetch(const std::optional<uint64_t>& caller,
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

absl::Status RRefService::MayRenew(const std::optional<uint64_t>& caller,
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

template <typename Work>
grpc::ServerUnaryReactor* RRefService::Immediate(
    grpc::CallbackServerContext* context, Work work) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(work()));
  return reactor;
}

void RRefService::Handle(absl::string_view method,
                         const google::protobuf::Message& request,
                         absl::AnyInvocable<void() &&> work) {
  RRefContext::OwnerHook hook = context_->owner_hook();
  if (hook == nullptr) {
    std::move(work)();
    return;
  }
  hook(method, request, std::move(work));
}

grpc::ServerUnaryReactor* RRefService::AddFork(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::ForkResponse*) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  absl::Status allowed =
      caller.ok() ? MayAddFork(*caller, *request) : caller.status();
  if (!allowed.ok()) return Refuse(context, allowed);
  OwnerTable* table = context_->owner_table();
  auto wait = std::make_shared<std::atomic<OwnerTable::WaitId>>(0);
  auto* reactor = new ParkedReactor(table, wait);
  const absl::Time deadline = WaitDeadline(*context_->clock(), context,
                                           context_->Timeout(std::nullopt));
  Handle("AddFork", *request, [table, wait, reactor, request, deadline] {
    wait->store(table->AddFork(
        RRefOf(*request), ForkOf(*request), request->holder(), deadline,
        [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); }));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::ConfirmFork(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::ForkResponse*) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  absl::Status allowed = caller.ok()
                             ? Claim(*caller, "holder", request->holder())
                             : caller.status();
  if (!allowed.ok()) return Refuse(context, allowed);
  auto* reactor = context->DefaultReactor();
  OwnerTable* table = context_->owner_table();
  Handle("ConfirmFork", *request, [table, reactor, request] {
    reactor->Finish(
        ToGrpcStatus(table->ConfirmFork(RRefOf(*request), ForkOf(*request),
                                        request->holder(), request->round())));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::DeleteFork(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::ForkResponse*) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  bool no_op = false;
  absl::Status allowed =
      caller.ok() ? MayDelete(*caller, *request, &no_op) : caller.status();
  if (!allowed.ok()) return Refuse(context, allowed);
  auto* reactor = context->DefaultReactor();
  if (no_op) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  OwnerTable* table = context_->owner_table();
  Handle("DeleteFork", *request, [table, reactor, request] {
    table->DeleteFork(RRefOf(*request), ForkOf(*request),
                      request->only_unconfirmed());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::Fetch(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::FetchResponse* response) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  absl::Status allowed =
      caller.ok() ? MayFetch(*caller, *request) : caller.status();
  if (!allowed.ok()) return Refuse(context, allowed);
  OwnerTable* table = context_->owner_table();
  auto wait = std::make_shared<std::atomic<OwnerTable::WaitId>>(0);
  auto* reactor = new ParkedReactor(table, wait);
  // RRefs inside the value are sent to the fetcher like any call's.
  std::shared_ptr<RRefCodec> codec = context_->ForPeer(request->holder());
  wait->store(table->Fetch(
      RRefOf(*request), ForkOf(*request),
      WaitDeadline(*context_->clock(), context,
                   context_->Timeout(std::nullopt)),
      [reactor, response, codec](absl::StatusOr<Value> value) {
        absl::Status s = value.status();
        if (s.ok())
          s = ValueToProto(*value, response->mutable_value(), codec.get());
        if (!s.ok()) {
          codec->Abandon();
          reactor->Finish(ToGrpcStatus(s));
          return;
        }
        codec->ReadyToSend().Then(
            [reactor, codec](const absl::StatusOr<Done>& r) {
              if (!r.ok()) codec->Abandon();
              reactor->Finish(ToGrpcStatus(r.status()));
            });
      }));
  return reactor;
}

absl::Status RRefService::Renew(const proto::LeaseRequest& request,
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

grpc::ServerUnaryReactor* RRefService::RenewLease(
    grpc::CallbackServerContext* context, const proto::LeaseRequest* request,
    proto::LeaseResponse* response) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  absl::Status allowed =
      caller.ok() ? MayRenew(*caller, *request) : caller.status();
  if (!allowed.ok()) return Refuse(context, allowed);
  auto* reactor = context->DefaultReactor();
  Handle("RenewLease", *request, [this, reactor, request, response] {
    reactor->Finish(ToGrpcStatus(Renew(*request, response)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::ListOwned(
    grpc::CallbackServerContext* context, const proto::ListOwnedRequest*,
    proto::ListOwnedResponse* response) {
  return Immediate(context, [&] {
    FERRY_ASSIGN_OR_RETURN(std::optional<uint64_t> caller, Caller(*context));
    if (const Authenticator* auth = context_->host().authenticator) {
      FERRY_RETURN_IF_ERROR(auth->CheckClient(
          caller, absl::StrCat(context_->host().name, ": ListOwned")));
    }
    for (proto::OwnedRRef& r : context_->owner_table()->List()) {
      *response->add_rrefs() = std::move(r);
    }
    return absl::OkStatus();
  });
}

}  // namespace ferry
