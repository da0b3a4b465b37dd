// What a function registered on a worker is: its context (who called,
// the deadline, cancellation, limits, trace), its asynchronous form over
// Values, and its options. Plain typed C++ functions become AsyncFunctions
// through rpc/function_adapter.h. The registry itself is rpc/registry.h.
#ifndef FERRY_RPC_FUNCTION_H_
#define FERRY_RPC_FUNCTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rpc/base/cancellation.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/base/trace_context.h"
#include "rpc/value/value.h"

namespace ferry {

// What a running function may know about its call.
struct CallContext {
  std::string worker;    // This worker's name.
  std::string function;  // The function's registered name.
  std::string caller;    // The caller's name (worker or client).
  uint64_t caller_node = 0;
  // On the worker's clock (its timers', rpc/base/clock.h), not the wall's.
  absl::Time deadline = absl::InfiniteFuture();
  // Cancelled when nobody waits for the result any more: the caller went
  // away or cancelled, the deadline passed, or the worker is stopping.
  // Work that waits (timers, nested calls, collective receives) registers
  // with cancellation->OnCancel() to stop waiting then; the call has
  // already been answered (CANCELLED) and its result will be dropped.
  // Null only for contexts made outside a call service.
  std::shared_ptr<Cancellation> cancellation;
  // What the call may make this worker hold or allocate (the worker's
  // --max_* flags); the call service points it at the worker's limits.
  // Never null.
  const Limits* limits = &DefaultLimits();
  // The call's trace (rpc/base/trace_context.h): its span here. Calls the
  // function makes continue it (NestedIn passes it; calls made on the
  // invoking thread pick it up as CurrentTrace()).
  TraceContext trace;
  // The call's keyword arguments; null when it has none. Only functions
  // registered with FunctionOptions::keywords are called with any.
  std::shared_ptr<const Value::Map> kwargs;

  bool IsCancelled() const {
    return cancellation != nullptr && cancellation->cancelled();
  }
};

// A function over Values returning a future; called concurrently.
using AsyncFunction =
    std::function<Future<Value>(const CallContext&, std::vector<Value>)>;

struct FunctionOptions {
  // Parameter names for the signature shown by `ferryctl functions`.
  std::vector<std::string> params;
  std::string doc;
  // Run on the RPC thread instead of the executor. Only for functions that
  // are quick and never block.
  bool run_inline = false;
  // The function takes keyword arguments (CallContext::kwargs): Python
  // functions do. Others refuse a call with any (INVALID_ARGUMENT).
  bool keywords = false;
};

}  // namespace ferry

#include "rpc/function_adapter.h"  // IWYU pragma: export

#endif  // FERRY_RPC_FUNCTION_H_
