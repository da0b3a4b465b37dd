#include "rref/fork_codec.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/status_util.h"
#include "rpc/value/rref_base.h"
#include "rref/owner_requests.h"

namespace ferry {

absl::Status ForkCodec::AddLocalFork(GlobalId rref, GlobalId fork,
                                     uint64_t holder) {
  auto added = std::make_shared<absl::Status>(absl::NotFoundError(
      absl::StrCat("rref ", GlobalIdString(rref), " is gone")));
  OwnerTable::WaitId parked = context_->owner_table()->AddFork(
      rref, fork, holder, context_->clock()->Now(),
      [added](absl::Status s) { *added = s; });
  if (parked != 0) context_->owner_table()->CancelWait(parked);  // Not ours.
  return *added;
}

ForkCodec::ForkCodec(std::shared_ptr<RRefContext> context, uint64_t peer)
    : context_(std::move(context)), peer_(peer) {}

ForkCodec::~ForkCodec() {
  // The call is over: its forks are no longer in transit (confirmed by
  // their receiver, or left to expire a lease from now).
  for (const Registered& r : registered_) context_->EndTransit(r.fork);
}

absl::StatusOr<proto::RRefHandle> ForkCodec::Encode(
    const Value::RRefPtr& rref) {
  auto state = std::dynamic_pointer_cast<const RRefState>(rref);
  if (state == nullptr ||
      state->core().lock().get() != static_cast<RRefCore*>(context_.get())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rref ", GlobalIdString(rref->descriptor().rref_id),
        " is not a live reference of this node (parsed from JSON?)"));
  }
  const RRefDescriptor& d = state->descriptor();
  // Neither the dead owner nor its replacement could register the copy.
  if (auto gone = context_->OwnerGone(*state)) return *gone;
  proto::RRefHandle handle = DescriptorToProto(d);
  const bool created = state->created().IsReady() &&
                       state->created().Wait(absl::ZeroDuration()).ok();
  if (peer_ == WorkerNode(d.owner_rank) && created) {
    lent_.push_back(state);  // Our copy keeps the value alive for the call.
    handle.set_borrowed(true);
    return handle;
  }
  GlobalId fork = context_->NewId();
  handle.set_fork_creator(fork.node);
  handle.set_fork_local(fork.local);
  registered_.push_back({d.rref_id, fork, d.owner_rank});
  context_->BeginTransit(d.rref_id, fork, d.owner_rank);
  if (context_->owns(d.owner_rank)) {
    // The entry exists while our copy does, so this completes at once.
    FERRY_RETURN_IF_ERROR(AddLocalFork(d.rref_id, fork, peer_));
  } else {
    Future<Done> added = context_->owners().AddFork(
        d.owner_rank, ForkRequestFor(d.rref_id, fork, peer_),
        context_->Timeout(std::nullopt));
    // G2: our copy (the parent) lives until the owner acknowledged the
    // child — else its delete could overtake the AddFork and free the
    // value the child is about to use. The callback holds it.
    added.Then([parent = state](const absl::StatusOr<Done>&) {});
    adds_.push_back(std::move(added));
  }
  return handle;
}

absl::StatusOr<Value::RRefPtr> ForkCodec::DecodeOnOwner(
    const proto::RRefHandle& handle) {
  RRefDescriptor d = DescriptorFromProto(handle);
  OwnerTable* table = context_->owner_table();
  const uint64_t self = context_->host().node;
  if (handle.borrowed()) {
    // The sender lends its copy for the call; take one of our own. Only a
    // holder has one to lend: else any caller could make the owner read it
    // any value whose id it guessed (to_here).
    if (!table->HoldsCopy(d.rref_id, peer_)) {
      return absl::PermissionDeniedError(
          absl::StrCat(IdentityLabel(peer_), " holds no copy of rref ",
                       GlobalIdString(d.rref_id),
                       " to lend (only a holder lends its copy "
                       "to the owner)"));
    }
    d.fork_id = context_->NewId();
    FERRY_RETURN_IF_ERROR(AddLocalFork(d.rref_id, d.fork_id, self));
  }
  absl::Status confirmed = table->ConfirmFork(d.rref_id, d.fork_id, self);
  if (!confirmed.ok()) return confirmed;
  return context_->Adopt(std::move(d), Future<Done>::Ready(Done()));
}

absl::StatusOr<Value::RRefPtr> ForkCodec::Decode(
    const proto::RRefHandle& handle) {
  // A peer's numbers index the directory and stubs below: bound them first.
  FERRY_RETURN_IF_ERROR(context_->CheckHandle(handle));
  if (context_->owns(handle.owner_rank())) return DecodeOnOwner(handle);
  if (handle.borrowed()) {
    return absl::InvalidArgumentError(
        "a lent rref reached a node that does not own it");
  }
  RRefDescriptor d = DescriptorFromProto(handle);
  absl::StatusOr<std::shared_ptr<const RRefState>> state =
      context_->Adopt(d, Future<Done>::Ready(Done()));
  if (!state.ok()) return state.status();
  // Read after Adopt: that round's listing (and every later one) has the
  // copy while we hold it, so the owner may reconcile from it.
  proto::ForkRequest confirm =
      ForkRequestFor(d.rref_id, d.fork_id, context_->host().node);
  confirm.set_round(context_->NextLeaseRound());
  context_->owners().Confirm(d.owner_rank, std::move(confirm));
  return Value::RRefPtr(*std::move(state));
}

void ForkCodec::Abandon() {
  for (const Registered& r : registered_) {
    if (context_->owns(r.owner)) {
      context_->owner_table()->DeleteFork(r.rref, r.fork,
                                          /*only_unconfirmed=*/true);
    } else {
      proto::ForkRequest req = ForkRequestFor(r.rref, r.fork, peer_);
      req.set_only_unconfirmed(true);
      context_->owners().Delete(r.owner, std::move(req));
    }
    context_->EndTransit(r.fork);
  }
  registered_.clear();
  lent_.clear();
}

}  // namespace ferry
