// The pieces of ToJson that other printers reuse (ferryctl's tables and
// value diffs): one tensor element, one number. Not part of ferry.h.
#ifndef FERRY_RPC_VALUE_JSON_FORMAT_H_
#define FERRY_RPC_VALUE_JSON_FORMAT_H_

#include <cstdint>
#include <string>

#include "rpc/value/tensor.h"

namespace ferry {

// The JSON of element `index` (row-major) of `tensor`, e.g. "5", "[1,2]".
std::string TensorElementJson(const Tensor& tensor, int64_t index);

// Shortest decimal text that reads back as exactly `value` (no ".0" added).
std::string FormatDouble(double value);
std::string FormatFloat(float value);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_JSON_FORMAT_H_
