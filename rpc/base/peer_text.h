// Text a peer chose — a function name it asked for, a key, a name it
// claims — as an error, a log line or a span may echo it: bounded and
// escaped, so what a peer sends is never echoed or kept at its own length,
// and no control byte or quote of it reaches a terminal or a JSON line.
//
//   return absl::NotFoundError(
//       absl::StrCat(EchoPeerText(name), ": no such function"));
//   // "nope", or "aaaa…aaa… (262144 bytes)" for a 256 KiB name
#ifndef FERRY_RPC_BASE_PEER_TEXT_H_
#define FERRY_RPC_BASE_PEER_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ferry {

// Most bytes of a peer's text echoed (before escaping).
inline constexpr size_t kEchoBytes = 64;

// The first `max_bytes` bytes of `text` (all of a shorter one; cut at a
// UTF-8 character boundary) with control bytes, quotes and backslashes
// C-escaped (UTF-8 kept, so plain text reads as itself), and, if cut,
// "… (N bytes)" after them.
std::string EchoPeerText(absl::string_view text, size_t max_bytes = kEchoBytes);

}  // namespace ferry

#endif  // FERRY_RPC_BASE_PEER_TEXT_H_
