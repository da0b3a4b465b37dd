#include "rpc/membership/node_names.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

// `text` as an error shows it: its start only, escaped.
std::string Shown(absl::string_view text) {
  constexpr size_t kShown = 64;
  return absl::StrCat("\"", absl::CEscape(text.substr(0, kShown)),
                      text.size() > kShown ? "…" : "", "\"");
}

bool NameByte(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '.' || c == '-';
}

}  // namespace

absl::Status CheckWorkerName(absl::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxWorkerNameBytes &&
            name != "." && name != "..";
  for (char c : name) ok = ok && NameByte(c);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("worker name ", Shown(name), " (", name.size(),
                   " bytes): a worker name is 1 to ", kMaxWorkerNameBytes,
                   " of A-Z a-z 0-9 _ . - (not \".\" or \"..\")"));
}

absl::Status CheckClientDescription(absl::string_view description) {
  bool ok = description.size() <= kMaxClientDescriptionBytes;
  for (char c : description) ok = ok && c >= 0x20 && c <= 0x7e;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("client description ", Shown(description), " (",
                   description.size(), " bytes): at most ",
                   kMaxClientDescriptionBytes, " bytes of printable ASCII"));
}

}  // namespace ferry
