// The text forms of a trace context: the W3C `traceparent` header (its
// metadata entry on RRef messages and collective streams, and on calls
// from callers that are not ferry) and the hex ids of exported spans. A
// call's own request carries the binary form (rpc/base/trace_binary.h).
#ifndef FERRY_RPC_BASE_TRACEPARENT_H_
#define FERRY_RPC_BASE_TRACEPARENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "rpc/base/trace_context.h"

namespace ferry {

// "00-<trace id>-<span id>-<flags>".
std::string FormatTraceparent(const TraceContext& context);
// The context of a `traceparent` value; nullopt for anything that is not
// a valid version-00 header (upper-case hex, all-zero ids, version ff, a
// wrong length): the receiver then starts a trace of its own.
std::optional<TraceContext> ParseTraceparent(absl::string_view header);
// 16 lower-case hex digits of a span id; ParseSpanId reads them back.
std::string SpanIdHex(uint64_t span_id);
std::optional<uint64_t> ParseSpanId(absl::string_view hex);
// The two halves of a 32-digit trace id.
std::optional<std::pair<uint64_t, uint64_t>> ParseTraceId(
    absl::string_view hex);

}  // namespace ferry

#endif  // FERRY_RPC_BASE_TRACEPARENT_H_
