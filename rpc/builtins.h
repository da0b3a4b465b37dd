// The functions every worker has (docs/DESIGN.md "Calls"): echo, add, sub, mul,
// div, sum, ones, zeros, arange, concat, sleep_ms, fail, worker_name.
// (to_here is registered by the RRef layer.)
#ifndef FERRY_RPC_BUILTINS_H_
#define FERRY_RPC_BUILTINS_H_

#include "absl/status/status.h"
#include "rpc/base/timers.h"
#include "rpc/registry.h"

namespace ferry {

// `timers` drives sleep_ms (which holds no thread) and must outlive calls.
absl::Status RegisterBuiltins(Registry* registry, Timers* timers);

}  // namespace ferry

#endif  // FERRY_RPC_BUILTINS_H_
