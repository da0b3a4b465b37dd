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

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/value/value.h"

namespace ferry {

// The value `text` holds, within DefaultLimits(). (ferryctl's scripts
// parse with more options: rpc/value/json_parse.h.)
absl::StatusOr<Value> ParseJson(absl::string_view text);

// Compact, deterministic (map keys sorted) JSON.
std::string ToJson(const Value& value);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_JSON_H_
