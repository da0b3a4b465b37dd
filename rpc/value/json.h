// The JSON form of values (docs/DESIGN.md "Values"), used by ferryctl, logs and
// tests:
//
//   tensor  {"dtype":"float32","shape":[2,2],"data":[1,2,3,4]}
//           {"dtype":"int64","data":[1,2,3]}          (1-D: shape omitted)
//           data is flat row-major (nested lists matching the shape are
//           accepted on input); complex entries are [re, im]; non-finite
//           floats are "NaN", "Infinity", "-Infinity".
//   bytes   {"$bytes":"<base64>"}
//   rref    {"$rref":"w0.3","owner":"worker1"}
//   double  non-finite doubles are {"$double":"NaN"} (JSON has no NaN).
//   JSON integers are int64, other numbers double, objects maps, arrays lists.
//
// Every parse error is INVALID_ARGUMENT naming the line and column.
// Numbers read as IEEE doubles rounded to nearest: 1e-400 is 0, 1e400 is
// infinity; integers that do not fit int64 read as doubles.
#ifndef FERRY_RPC_VALUE_JSON_H_
#define FERRY_RPC_VALUE_JSON_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/base/limits.h"
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
                                const JsonParseOptions& options = {});

// Compact, deterministic (map keys sorted) JSON.
std::string ToJson(const Value& value);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_JSON_H_
