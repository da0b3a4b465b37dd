#include "rpc/base/peer_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ferry {

std::string EchoPeerText(absl::string_view text, size_t max_bytes) {
  size_t cut = text.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    // Not inside a UTF-8 character: continuation bytes are 10xxxxxx.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
      --cut;
    }
  }
  std::string out = absl::Utf8SafeCHexEscape(text.substr(0, cut));
  if (cut < text.size()) absl::StrAppend(&out, "… (", text.size(), " bytes)");
  return out;
}

}  // namespace ferry
