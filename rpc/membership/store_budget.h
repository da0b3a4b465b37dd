// StoreBudget: what each caller of the job's store (store_state.h) holds
// there, charged to it from the moment it takes it until it gives it back,
// within three shares:
//
//   - one caller's: a node, by the credential its calls prove (a worker, a
//     client); callers that prove none (torch's ferry://, ferry.store) are
//     one caller together. At most `caller` of each resource.
//   - the job's: every caller's charges together, at most `job`.
//   - a reserved share, beyond the job's, for the workers' own keys and
//     waits (those under "ferry/": elastic agreements): at most `reserved`.
//     Only a worker's charge for such keys goes there (and to its own
//     account once the share is full); no client or anonymous caller can
//     take any of it, so a full store never stops an agreement.
//
// Resources: keys held (each charged to the caller that last wrote it),
// bytes of those keys and values, calls waiting for keys, and the bytes of
// the keys those calls wait for. A key's charge is given back when it is
// deleted or overwritten (the writer's charge replaces it); a wait's when
// it ends, however it ends (its keys set, its deadline, its caller's
// cancellation — a caller that leaves cancels its calls —, the store
// stopping). Keys outlive their writer, as torch's store has it.
//
// Not thread-safe: its owner's lock guards it.
#ifndef FERRY_RPC_MEMBERSHIP_STORE_BUDGET_H_
#define FERRY_RPC_MEMBERSHIP_STORE_BUDGET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ferry {

// Who a store call is charged to.
struct StoreCaller {
  // The node the call proved it is; nullopt: none (every such caller is
  // one account).
  std::optional<uint64_t> node;
  // One of the job's workers: may change keys under StoreState's
  // kWorkersOnly, and uses the reserved share for keys under "ferry/".
  bool worker = false;
};

// "worker2", "client node 4294967297", "callers without a credential".
std::string StoreCallerLabel(const StoreCaller& caller);

// An amount of each resource: what is held, charged, or allowed.
struct StoreAmount {
  int64_t keys = 0;
  int64_t bytes = 0;       // Of keys and values held.
  int64_t waits = 0;       // Calls waiting for keys.
  int64_t wait_bytes = 0;  // Of the keys those calls wait for.

  friend bool operator==(const StoreAmount& a, const StoreAmount& b) {
    return a.keys == b.keys && a.bytes == b.bytes && a.waits == b.waits &&
           a.wait_bytes == b.wait_bytes;
  }
};

struct StoreShares {
  StoreAmount caller = {8192, int64_t{8} << 20, 1024, int64_t{8} << 20};
  StoreAmount job = {65536, int64_t{64} << 20, 4096, int64_t{64} << 20};
  StoreAmount reserved = {4096, int64_t{4} << 20, 16, int64_t{1} << 20};
};

class StoreBudget {
 public:
  // Where an amount was charged: what Give needs to give it back.
  struct Charge {
    bool reserved = false;  // The reserved share (else the caller's and
                            // the job's).
    std::optional<uint64_t> node;
    StoreAmount amount;
  };

  explicit StoreBudget(StoreShares shares);

  // Charges `amount` to `caller`: to the reserved share if `system` (a
  // worker's call on keys under "ferry/" only) and it has room, else to
  // the caller's account and the job's. RESOURCE_EXHAUSTED naming the
  // account, the resource, what it would hold and the limit if none has
  // room; nothing is charged then.
  absl::StatusOr<Charge> Take(const StoreCaller& caller, bool system,
                              const StoreAmount& amount);
  // Gives back a charge Take made.
  void Give(const Charge& charge);
  // Charges again what Give just gave back, with nothing taken between:
  // always room.
  void Restore(const Charge& charge);

  // What `caller` holds in its account (not in the reserved share).
  StoreAmount held(const StoreCaller& caller) const;
  StoreAmount job_held() const { return job_; }
  StoreAmount reserved_held() const { return reserved_; }
  // Accounts holding anything.
  int64_t accounts() const { return static_cast<int64_t>(callers_.size()); }

 private:
  const StoreShares shares_;
  absl::flat_hash_map<std::optional<uint64_t>, StoreAmount> callers_;
  StoreAmount job_;
  StoreAmount reserved_;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_STORE_BUDGET_H_
