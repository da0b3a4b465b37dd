// ferryd's limit flags: one per field of ferry::Limits (rpc/base/limits.h),
// named as Limits::AsFlags() names them, defaulting to Limits{}.
#ifndef FERRY_TOOLS_FERRYD_LIMIT_FLAGS_H_
#define FERRY_TOOLS_FERRYD_LIMIT_FLAGS_H_

#include "absl/status/statusor.h"
#include "rpc/base/limits.h"

namespace ferry {

// The limits the flags set. INVALID_ARGUMENT naming the flag for a value
// below 1 or too large for its unit.
absl::StatusOr<Limits> LimitsFromFlags();

}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYD_LIMIT_FLAGS_H_
