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
//
// A client's op ids are its own (issue 25): NewClientOpId makes
// "<client node>.<128 random bits>", which no other client can predict, and
// a worker runs an op only for the node its id names (CheckClientOpId,
// PERMISSION_DENIED naming both otherwise): another client cannot take an
// op's id to deny it.
#ifndef FERRY_COLLECTIVES_CLIENT_SERVICE_H_
#define FERRY_COLLECTIVES_CLIENT_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "collectives/op/collective_context.h"

namespace ferry {

inline constexpr char kCollectiveFunction[] = "ferry.collective";
// The longest timeout a client may give an op (a week): longer ones would
// make the deadline overflow into "never".
inline constexpr int64_t kMaxCollectiveTimeoutMs =
    int64_t{7} * 24 * 3600 * 1000;

// A fresh op id for client (node) `client`.
std::string NewClientOpId(uint64_t client);

// OK if `op_id` is one `caller` made (it starts with "<caller>.");
// PERMISSION_DENIED naming the op id, the node it belongs to and the
// caller otherwise.
absl::Status CheckClientOpId(absl::string_view op_id, uint64_t caller);

// Registers ferry.collective on `context`'s worker (before it starts).
absl::Status RegisterCollectiveFunctions(
    const std::shared_ptr<CollectiveContext>& context);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_CLIENT_SERVICE_H_
