#include "rpc/base/status_util.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

std::string StatusCodeName(absl::StatusCode code) {
  return absl::StatusCodeToString(code);
}

bool ParseStatusCodeName(absl::string_view name, absl::StatusCode* code) {
  for (int c = 0; c <= 16; ++c) {
    auto candidate = static_cast<absl::StatusCode>(c);
    if (StatusCodeName(candidate) == name) {
      *code = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace ferry
