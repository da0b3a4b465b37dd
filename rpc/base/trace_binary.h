// W3C trace context in its binary form (the trace-context-binary draft;
// gRPC's `grpc-trace-bin` layout): what ferry's own call requests carry
// (proto/worker.proto), since writing and reading it costs a few dozen
// instructions where the `traceparent` text header costs hundreds, and a
// gRPC metadata entry thousands.
//
// 29 bytes: version 0, then field 0 the trace id, field 1 the span id,
// field 2 the flags, each its id byte and big-endian bytes.
#ifndef FERRY_RPC_BASE_TRACE_BINARY_H_
#define FERRY_RPC_BASE_TRACE_BINARY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "rpc/base/trace_context.h"

namespace ferry {

inline constexpr size_t kTraceparentBinarySize = 29;

std::string FormatTraceparentBinary(const TraceContext& context);
// nullopt for anything else: another length or version, a field id out of
// place, all-zero ids.
std::optional<TraceContext> ParseTraceparentBinary(absl::string_view bytes);

}  // namespace ferry

#endif  // FERRY_RPC_BASE_TRACE_BINARY_H_
