// What a node may call itself. A worker's name and a client's description
// are data a peer chose: they go into errors, events, spans, labels and
// (ferryctl's) listings, so the master takes only a fixed alphabet and
// length (Join, RegisterClient), and nothing derives a path from them
// (flight recorder dumps are named by rank: worker<rank>.json).
#ifndef FERRY_RPC_MEMBERSHIP_NODE_NAMES_H_
#define FERRY_RPC_MEMBERSHIP_NODE_NAMES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

inline constexpr size_t kMaxWorkerNameBytes = 64;
inline constexpr size_t kMaxClientDescriptionBytes = 64;

// 1 to kMaxWorkerNameBytes of [A-Za-z0-9_.-], not "." or "..".
// INVALID_ARGUMENT naming the rule and the name (escaped, cut) otherwise.
absl::Status CheckWorkerName(absl::string_view name);

// At most kMaxClientDescriptionBytes of printable ASCII (space included;
// empty is fine). INVALID_ARGUMENT as above otherwise.
absl::Status CheckClientDescription(absl::string_view description);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_NODE_NAMES_H_
