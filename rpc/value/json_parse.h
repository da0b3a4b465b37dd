// ParseJson with the options of callers that embed JSON in other text
// (ferryctl's scripts): `$NAME` variables, a value followed by more text,
// where a parse failed, explicit limits. Not part of ferry.h.
#ifndef FERRY_RPC_VALUE_JSON_PARSE_H_
#define FERRY_RPC_VALUE_JSON_PARSE_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/base/limits.h"
#include "rpc/value/json.h"
#include "rpc/value/value.h"

namespace ferry {

// Where a parse failed (1-based), for callers that embed JSON in other text.
struct JsonErrorPosition {
  int line = 0;
  int column = 0;
  std::string message;  // Without the "json: line L, column C: " prefix.
};

struct JsonParseOptions {
  // Resolves `$NAME` tokens written where a JSON value may stand (outside
  // strings). Unset: `$` is a syntax error. An error it returns is reported
  // with the token's position.
  std::function<absl::StatusOr<Value>(absl::string_view name)> resolve_variable;
  // If set, parsing stops after the first value and stores how many bytes
  // it (and the spaces after it) took; text after it is not an error.
  size_t* consumed = nullptr;
  // If set, receives the position of a parse error.
  JsonErrorPosition* error = nullptr;
  // What the value may hold (nullptr: DefaultLimits()): at most max_items
  // values, substituted ones included; strings up to max_string_bytes;
  // tensor shapes as tensor.h's rules say. Nesting (also through `$NAME`)
  // stops at kMaxValueDepth. Over a limit: RESOURCE_EXHAUSTED (items,
  // strings) or INVALID_ARGUMENT (nesting, shapes), naming the position
  // and the flag.
  const Limits* limits = nullptr;
};

absl::StatusOr<Value> ParseJson(absl::string_view text,
                                const JsonParseOptions& options);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_JSON_PARSE_H_
