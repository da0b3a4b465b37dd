#include "rref/rref.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/value/rref_base.h"
#include "rref/rref_state.h"

namespace ferry {

RRef::RRef(std::shared_ptr<const RRefState> state) : state_(std::move(state)) {}

Value RRef::AsValue() const { return Value(Value::RRefPtr(state_)); }

GlobalId RRef::id() const { return state_->descriptor().rref_id; }

const std::string& RRef::owner_name() const {
  return state_->descriptor().owner;
}

int RRef::owner_rank() const { return state_->descriptor().owner_rank; }

absl::StatusOr<RRef> RRef::FromValue(const Value& value) {
  if (!value.is_rref()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an rref, got ", value.kind_name()));
  }
  auto state = std::dynamic_pointer_cast<const RRefState>(value.as_rref());
  if (state == nullptr || state->core().expired()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rref ", GlobalIdString(value.as_rref()->descriptor().rref_id),
        " is a bare description (from JSON, or its node stopped), not a live "
        "reference"));
  }
  return RRef(std::move(state));
}

absl::StatusOr<std::shared_ptr<RRefCore>> RRef::Core() const {
  if (state_ == nullptr) return absl::FailedPreconditionError("empty RRef");
  auto core = state_->core().lock();
  if (core == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("rref ", GlobalIdString(id()), ": its node has stopped"));
  }
  return core;
}

bool RRef::IsOwner() const {
  absl::StatusOr<std::shared_ptr<RRefCore>> core = Core();
  return core.ok() && (*core)->IsOwner(*state_);
}

bool RRef::ConfirmedByOwner() const {
  return state_ != nullptr && state_->confirmed();
}

Future<Value> RRef::ToHereAsync(std::optional<absl::Duration> timeout) const {
  absl::StatusOr<std::shared_ptr<RRefCore>> core = Core();
  if (!core.ok()) return Future<Value>::Ready(core.status());
  return (*core)->ToHere(state_, timeout);
}

absl::StatusOr<Value> RRef::ToHere(
    std::optional<absl::Duration> timeout) const {
  // The fetch is bounded by its own deadline (or fails when the owner dies).
  return ToHereAsync(timeout).Wait(absl::InfiniteDuration());
}

absl::StatusOr<Value> RRef::LocalValue() const {
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<RRefCore> core, Core());
  return core->LocalValue(*state_);
}

Future<Value> RRef::RpcAsync(const std::string& fn, std::vector<Value> args,
                             std::optional<absl::Duration> timeout) const {
  absl::StatusOr<std::shared_ptr<RRefCore>> core = Core();
  if (!core.ok()) return Future<Value>::Ready(core.status());
  return (*core)->CallOnOwner(state_, fn, std::move(args), timeout);
}

absl::StatusOr<Value> RRef::RpcSync(
    const std::string& fn, std::vector<Value> args,
    std::optional<absl::Duration> timeout) const {
  return RpcAsync(fn, std::move(args), timeout).Wait(absl::InfiniteDuration());
}

absl::StatusOr<RRef> RRef::Remote(const std::string& fn,
                                  std::vector<Value> args,
                                  std::optional<absl::Duration> timeout) const {
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<RRefCore> core, Core());
  FERRY_ASSIGN_OR_RETURN(
      Value v, core->RemoteOnOwner(state_, fn, std::move(args), timeout));
  return FromValue(v);
}

}  // namespace ferry
