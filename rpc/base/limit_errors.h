// How an error names a limit: "<what>, over the limit of 2 GiB
// (--max_alloc_mb=2048)", and the flags of a worker's limits (its status).
// For the code that enforces limits.h's fields; not part of ferry.h.
#ifndef FERRY_RPC_BASE_LIMIT_ERRORS_H_
#define FERRY_RPC_BASE_LIMIT_ERRORS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

struct Limits;

// "over the limit of 2 GiB (--max_alloc_mb=2048)"-style tail for errors:
// `flag` is the flag's name without "--", `flag_value` its value in the
// flag's unit, `limit` what it means (e.g. "2 GiB").
std::string LimitNote(absl::string_view limit, absl::string_view flag,
                      int64_t flag_value);

// RESOURCE_EXHAUSTED "<what>, over the limit of <limit> (--flag=value)".
absl::Status OverLimit(absl::string_view what, absl::string_view limit,
                       absl::string_view flag, int64_t flag_value);

// Every field of `limits` as (flag name without "--", value in the flag's
// unit), for a worker's status.
std::vector<std::pair<std::string, int64_t>> LimitFlags(const Limits& limits);

// "1.5 GiB", "64 KiB", "12 B".
std::string HumanBytes(int64_t bytes);

}  // namespace ferry

#endif  // FERRY_RPC_BASE_LIMIT_ERRORS_H_
