// Small helpers for absl::Status, used across ferry.
//
// Abseil 20220623 ships no status macros, so the two every caller needs live
// here, once:
//
//   FERRY_RETURN_IF_ERROR(DoThing());
//   FERRY_ASSIGN_OR_RETURN(Tensor t, ParseTensor(json));
#ifndef FERRY_RPC_BASE_STATUS_UTIL_H_
#define FERRY_RPC_BASE_STATUS_UTIL_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define FERRY_STATUS_CONCAT_INNER_(a, b) a##b
#define FERRY_STATUS_CONCAT_(a, b) FERRY_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define FERRY_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status ferry_status_ = (expr);         \
    if (!ferry_status_.ok()) return ferry_status_; \
  } while (false)

// Evaluates `rexpr` (a StatusOr); returns its status on error, otherwise
// moves the value into `lhs` (which may be a declaration).
#define FERRY_ASSIGN_OR_RETURN(lhs, rexpr)                                 \
  FERRY_ASSIGN_OR_RETURN_IMPL_(FERRY_STATUS_CONCAT_(ferry_sor_, __LINE__), \
                               lhs, rexpr)

#define FERRY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

namespace ferry {

// Returns `status` with "`context`: " prepended to its message; the code is
// kept. OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

// Returns the canonical upper-case name of `code` ("INVALID_ARGUMENT").
std::string StatusCodeName(absl::StatusCode code);

// Parses a canonical code name; false if unknown.
bool ParseStatusCodeName(absl::string_view name, absl::StatusCode* code);

}  // namespace ferry

#endif  // FERRY_RPC_BASE_STATUS_UTIL_H_
