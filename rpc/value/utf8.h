// UTF-8 validation (proto3 strings and JSON text must be well-formed).
#ifndef FERRY_RPC_VALUE_UTF8_H_
#define FERRY_RPC_VALUE_UTF8_H_

#include "absl/strings/string_view.h"

namespace ferry {

// True if `text` is well-formed UTF-8: no overlong forms, surrogates, or
// code points beyond U+10FFFF.
bool IsValidUtf8(absl::string_view text);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_UTF8_H_
