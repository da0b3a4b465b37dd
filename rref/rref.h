// RRef: a reference to a value that lives on another worker (its owner),
// as torch.distributed.rpc's RRef.
//
//   absl::StatusOr<RRef> r = worker.Remote("worker1", "add", {ones, 3});
//   absl::StatusOr<Value> v = r->ToHere();                 // fetch a copy
//   worker.RpcSync("worker2", "to_here", {r->AsValue()});  // pass it on
//
// (`worker`: a ferry::Worker, tools/runtime/worker.h; a ferry::Client's
// Remote is the same.)
//
// Copies are cheap (a shared pointer). When the last copy on a node goes,
// the owner is told at once; the owner frees the value when no node holds
// it any more (or when holders die: leases). All methods are thread-safe.
// An RRef whose node stopped answers FAILED_PRECONDITION; one whose owner
// died answers UNAVAILABLE "owner <name> died".
#ifndef FERRY_RREF_RREF_H_
#define FERRY_RREF_RREF_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"

namespace ferry {

// Behind RRef, not shown to users (rref_state.h).
class RRefCore;
class RRefState;

class RRef {
 public:
  // An RRef carried by a Value. FAILED_PRECONDITION if it is not one of a
  // running node's (e.g. parsed from JSON); INVALID_ARGUMENT if not an RRef.
  static absl::StatusOr<RRef> FromValue(const Value& value);

  RRef() = default;
  explicit RRef(std::shared_ptr<const RRefState> state);

  bool valid() const { return state_ != nullptr; }
  Value AsValue() const;

  GlobalId id() const;
  const std::string& owner_name() const;
  int owner_rank() const;
  bool IsOwner() const;
  // True once the owner holds the RRef (remote(): its creating call
  // returned successfully, or a ToHere() of it succeeded).
  bool ConfirmedByOwner() const;

  // A copy of the value. DEADLINE_EXCEEDED if it (or the creation) did not
  // arrive in time; the creating call's error if it failed. Default timeout:
  // the node's call timeout.
  Future<Value> ToHereAsync(
      std::optional<absl::Duration> timeout = std::nullopt) const;
  absl::StatusOr<Value> ToHere(
      std::optional<absl::Duration> timeout = std::nullopt) const;

  // The value itself, on the owner only (FAILED_PRECONDITION elsewhere).
  absl::StatusOr<Value> LocalValue() const;

  // Proxies: run registered `fn(value, args…)` on the owner.
  Future<Value> RpcAsync(
      const std::string& fn, std::vector<Value> args = {},
      std::optional<absl::Duration> timeout = std::nullopt) const;
  absl::StatusOr<Value> RpcSync(
      const std::string& fn, std::vector<Value> args = {},
      std::optional<absl::Duration> timeout = std::nullopt) const;
  absl::StatusOr<RRef> Remote(
      const std::string& fn, std::vector<Value> args = {},
      std::optional<absl::Duration> timeout = std::nullopt) const;

 private:
  absl::StatusOr<std::shared_ptr<RRefCore>> Core() const;
  std::shared_ptr<const RRefState> state_;
};

}  // namespace ferry

#endif  // FERRY_RREF_RREF_H_
