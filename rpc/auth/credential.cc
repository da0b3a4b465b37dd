#include "rpc/auth/credential.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rpc/auth/node_key.h"

namespace ferry {

namespace {

// The longest header any sender makes: bounds the work a forged one costs.
constexpr size_t kMaxHeader =
    3 + 20 + 1 + 2 * (2 * kTokenBytes) + 2 * kPublicKeyBytes + 3;

// `hex` decoded, if it is exactly `bytes` bytes of lowercase hex.
std::optional<std::string> Hex(absl::string_view hex, size_t bytes) {
  if (hex.size() != 2 * bytes) return std::nullopt;
  for (char c : hex) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return std::nullopt;
  }
  return absl::HexStringToBytes(hex);
}

}  // namespace

std::string FormatCredential(const PresentedCredential& c) {
  std::string out =
      absl::StrCat("v1.", c.node, ".", absl::BytesToHexString(c.token));
  if (!c.voucher.empty()) {
    absl::StrAppend(&out, ".", absl::BytesToHexString(c.public_key), ".",
                    absl::BytesToHexString(c.voucher));
  }
  return out;
}

std::optional<PresentedCredential> ParseCredential(absl::string_view header) {
  if (header.size() > kMaxHeader) return std::nullopt;
  std::vector<absl::string_view> parts = absl::StrSplit(header, '.');
  if ((parts.size() != 3 && parts.size() != 5) || parts[0] != "v1" ||
      parts[1].empty() || parts[1].size() > 20) {
    return std::nullopt;
  }
  PresentedCredential c;
  if (!absl::SimpleAtoi(parts[1], &c.node)) return std::nullopt;
  std::optional<std::string> token = Hex(parts[2], kTokenBytes);
  if (!token.has_value()) return std::nullopt;
  c.token = *std::move(token);
  if (parts.size() == 5) {
    std::optional<std::string> key = Hex(parts[3], kPublicKeyBytes);
    std::optional<std::string> voucher = Hex(parts[4], kTokenBytes);
    if (!key.has_value() || !voucher.has_value()) return std::nullopt;
    c.public_key = *std::move(key);
    c.voucher = *std::move(voucher);
  }
  return c;
}

}  // namespace ferry
