// The collectives' entry point for clients: the built-in function
//
//   ferry.collective(op, op_id, input, params, timeout_ms)
//
// runs collective `op` with this worker's `input` on the world group, or on
// the ranks in params "group"; the
// client calls it on every taking-part worker with the same op_id (which
// names the op, see CollectiveOptions::tag) and gathers the results
// (client_collective.h). The op holds no thread while it waits, but its
// inputs and messages until it ends: so a client may ask for at most
// --max_collective_timeout_ms (a longer timeout_ms is refused,
// RESOURCE_EXHAUSTED naming the flag, on every member), timeout_ms 0 (the
// worker's default call timeout) is clamped to it, and at most 256 client
// ops run on a worker at once. op_id has at most kMaxOpTagBytes
// (op_key.h).
#ifndef FERRY_COLLECTIVES_SERVICE_H_
#define FERRY_COLLECTIVES_SERVICE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "collectives/collective_context.h"

namespace ferry {

inline constexpr char kCollectiveFunction[] = "ferry.collective";
// The longest timeout a client may give an op (a week): longer ones would
// make the deadline overflow into "never".
inline constexpr int64_t kMaxCollectiveTimeoutMs =
    int64_t{7} * 24 * 3600 * 1000;

// Registers ferry.collective on `context`'s worker (before it starts).
absl::Status RegisterCollectiveFunctions(
    const std::shared_ptr<CollectiveContext>& context);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_SERVICE_H_
