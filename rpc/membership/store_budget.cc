#include "rpc/membership/store_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry {

namespace {

// The first resource of `amount` over `limit` once added to `held`
// (compared without overflow: amounts are never negative); an empty name
// if none.
struct Over {
  absl::string_view what;
  int64_t would = 0;
  int64_t limit = 0;
};
Over FirstOver(const StoreAmount& held, const StoreAmount& amount,
               const StoreAmount& limit) {
  struct Field {
    absl::string_view what;
    int64_t StoreAmount::*member;
  };
  static constexpr Field kFields[] = {
      {"keys", &StoreAmount::keys},
      {"bytes of keys and values", &StoreAmount::bytes},
      {"waiting calls", &StoreAmount::waits},
      {"bytes of keys waited for", &StoreAmount::wait_bytes},
  };
  for (const Field& f : kFields) {
    if (amount.*f.member > 0 &&
        amount.*f.member > limit.*f.member - held.*f.member) {
      return {f.what, held.*f.member + amount.*f.member, limit.*f.member};
    }
  }
  return {};
}

void Add(StoreAmount& to, const StoreAmount& amount, int sign) {
  to.keys += sign * amount.keys;
  to.bytes += sign * amount.bytes;
  to.waits += sign * amount.waits;
  to.wait_bytes += sign * amount.wait_bytes;
}

bool Empty(const StoreAmount& a) { return a == StoreAmount{}; }

absl::Status Exhausted(absl::string_view who, const Over& over,
                       absl::string_view share) {
  return absl::ResourceExhaustedError(
      absl::StrCat("store: ", who, " would hold ", over.would, " ", over.what,
                   ", over the limit of ", over.limit, " ", share));
}

}  // namespace

std::string StoreCallerLabel(const StoreCaller& caller) {
  if (!caller.node.has_value()) return "callers without a credential";
  // A worker's node is its rank (directory.h).
  if (caller.worker) return absl::StrCat("worker", *caller.node);
  return absl::StrCat("client node ", *caller.node);
}

StoreBudget::StoreBudget(StoreShares shares) : shares_(std::move(shares)) {}

absl::StatusOr<StoreBudget::Charge> StoreBudget::Take(
    const StoreCaller& caller, bool system, const StoreAmount& amount) {
  if (system && FirstOver(reserved_, amount, shares_.reserved).what.empty()) {
    Add(reserved_, amount, 1);
    return Charge{true, caller.node, amount};
  }
  auto it = callers_.find(caller.node);
  const StoreAmount mine = it == callers_.end() ? StoreAmount{} : it->second;
  if (Over o = FirstOver(mine, amount, shares_.caller); !o.what.empty()) {
    return Exhausted(StoreCallerLabel(caller), o, "per caller");
  }
  if (Over o = FirstOver(job_, amount, shares_.job); !o.what.empty()) {
    return Exhausted("the job's callers together", o, "per job");
  }
  Add(callers_[caller.node], amount, 1);
  Add(job_, amount, 1);
  return Charge{false, caller.node, amount};
}

void StoreBudget::Give(const Charge& charge) {
  if (charge.reserved) {
    Add(reserved_, charge.amount, -1);
    return;
  }
  auto it = callers_.find(charge.node);
  if (it == callers_.end()) return;  // Never: every charge has its account.
  Add(it->second, charge.amount, -1);
  Add(job_, charge.amount, -1);
  if (Empty(it->second)) callers_.erase(it);
}

void StoreBudget::Restore(const Charge& charge) {
  if (charge.reserved) {
    Add(reserved_, charge.amount, 1);
    return;
  }
  Add(callers_[charge.node], charge.amount, 1);
  Add(job_, charge.amount, 1);
}

StoreAmount StoreBudget::held(const StoreCaller& caller) const {
  auto it = callers_.find(caller.node);
  return it == callers_.end() ? StoreAmount{} : it->second;
}

}  // namespace ferry
