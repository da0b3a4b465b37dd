// One copy of a remote reference as it lives in a Value: its identity plus
// what using it needs. Internal to the rref/ layer; users see rref/rref.h.
#ifndef FERRY_RREF_RREF_STATE_H_
#define FERRY_RREF_RREF_STATE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/value.h"

namespace ferry {

class RRefCore;

// A copy (fork) held by this node. When the last Value holding it goes,
// the copy is released to its owner (G1) — at once, not at shutdown.
class RRefState final : public RRefBase {
 public:
  // `created` resolves when the owner has the RRef (remote(): when the
  // creating call returned; received copies: already). `owner_generation`:
  // which incarnation of the owner's rank holds the value (WorkerInfo's).
  RRefState(RRefDescriptor descriptor, std::weak_ptr<RRefCore> core,
            Future<Done> created, uint64_t owner_generation = 0)
      : RRefBase(std::move(descriptor)),
        core_(std::move(core)),
        created_(std::move(created)),
        owner_generation_(owner_generation) {}
  ~RRefState() override;

  const std::weak_ptr<RRefCore>& core() const { return core_; }
  const Future<Done>& created() const { return created_; }
  // A replacement of the owner (a later generation) does not have it.
  uint64_t owner_generation() const { return owner_generation_; }

  // The owner holds the RRef: its creation returned, or a fetch of its
  // value succeeded (which may come back before the creating call's reply).
  bool confirmed() const {
    if (fetched_.load(std::memory_order_acquire)) return true;
    return created_.IsReady() && created_.Wait(absl::ZeroDuration()).ok();
  }
  void MarkFetched() const { fetched_.store(true, std::memory_order_release); }

 private:
  const std::weak_ptr<RRefCore> core_;
  const Future<Done> created_;
  const uint64_t owner_generation_;
  mutable std::atomic<bool> fetched_{false};
};

// What a copy needs from its node's RRef context (rref/rref_context.h).
class RRefCore {
 public:
  virtual ~RRefCore() = default;
  // The last reference to `descriptor`'s copy went away.
  virtual void Released(const RRefDescriptor& descriptor) = 0;
  virtual bool IsOwner(const RRefState& rref) const = 0;
  // Unset timeout: the node's default; 0: none.
  virtual Future<Value> ToHere(const std::shared_ptr<const RRefState>& rref,
                               std::optional<absl::Duration> timeout) = 0;
  virtual absl::StatusOr<Value> LocalValue(const RRefState& rref) = 0;
  // Runs `fn(value, args…)` on the owner.
  virtual Future<Value> CallOnOwner(
      const std::shared_ptr<const RRefState>& rref, const std::string& fn,
      std::vector<Value> args, std::optional<absl::Duration> timeout) = 0;
  // remote() of `fn(value, args…)` on the owner.
  virtual absl::StatusOr<Value> RemoteOnOwner(
      const std::shared_ptr<const RRefState>& rref, const std::string& fn,
      std::vector<Value> args, std::optional<absl::Duration> timeout) = 0;
};

}  // namespace ferry

#endif  // FERRY_RREF_RREF_STATE_H_
