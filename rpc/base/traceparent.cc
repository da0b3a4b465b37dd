#include "rpc/base/traceparent.h"

#include <cstdint>
#include <cstring>
#include <utility>

namespace ferry {

namespace {

// Each byte's value as a lower-case hex digit, or -1 (upper case is not
// W3C's). A table, not comparisons: every call parses 50 digits.
struct HexTable {
  int8_t value[256];
  constexpr HexTable() : value() {
    for (int c = 0; c < 256; ++c) value[c] = -1;
    for (int c = '0'; c <= '9'; ++c) value[c] = static_cast<int8_t>(c - '0');
    for (int c = 'a'; c <= 'f'; ++c)
      value[c] = static_cast<int8_t>(c - 'a' + 10);
  }
};
constexpr HexTable kHex;

int HexValue(char c) { return kHex.value[static_cast<unsigned char>(c)]; }

// Sixteen digits at `s` (the caller checked the length). The digits'
// values are or-ed together: any -1 makes the result negative.
std::optional<uint64_t> Hex64At(const char* s) {
  uint64_t v = 0;
  int bad = 0;
  for (int i = 0; i < 16; ++i) {
    const int d = HexValue(s[i]);
    bad |= d;
    v = v << 4 | static_cast<uint64_t>(d & 0xf);
  }
  if (bad < 0) return std::nullopt;
  return v;
}

std::optional<uint64_t> Hex64(absl::string_view s) {
  if (s.size() != 16) return std::nullopt;
  return Hex64At(s.data());
}

// Two hex digits for each byte value.
struct HexPairs {
  char digits[256][2];
  constexpr HexPairs() : digits() {
    constexpr char kDigits[] = "0123456789abcdef";
    for (int b = 0; b < 256; ++b) {
      digits[b][0] = kDigits[b >> 4];
      digits[b][1] = kDigits[b & 0xf];
    }
  }
};
constexpr HexPairs kHexPairs;

// `v` as 16 lower-case hex digits at `out`.
void PutHex64(uint64_t v, char* out) {
  for (int i = 7; i >= 0; --i, v >>= 8) {
    std::memcpy(out + 2 * i, kHexPairs.digits[v & 0xff], 2);
  }
}

}  // namespace

std::string FormatTraceparent(const TraceContext& c) {
  // On every call: by hand, not through a format parser. 55 characters:
  // 00-<32 hex>-<16 hex>-<2 hex>.
  std::string out(55, '-');
  out[0] = out[1] = '0';
  PutHex64(c.trace_hi, &out[3]);
  PutHex64(c.trace_lo, &out[19]);
  PutHex64(c.span_id, &out[36]);
  out[53] = '0';
  out[54] = c.sampled ? '1' : '0';
  return out;
}

std::optional<TraceContext> ParseTraceparent(absl::string_view h) {
  // version "00": exactly 2+1+32+1+16+1+2 = 55 characters.
  if (h.size() != 55 || h.substr(0, 3) != "00-" || h[35] != '-' ||
      h[52] != '-') {
    return std::nullopt;
  }
  std::optional<uint64_t> hi = Hex64At(h.data() + 3);
  std::optional<uint64_t> lo = Hex64At(h.data() + 19);
  std::optional<uint64_t> span = Hex64At(h.data() + 36);
  const int f_hi = HexValue(h[53]), f_lo = HexValue(h[54]);
  if (!hi || !lo || !span || f_hi < 0 || f_lo < 0) return std::nullopt;
  TraceContext c{*hi, *lo, *span, false};
  if (!c.valid()) return std::nullopt;
  c.sampled = (f_lo & 1) != 0;
  return c;
}

std::string SpanIdHex(uint64_t span_id) {
  std::string out(16, '0');
  PutHex64(span_id, &out[0]);
  return out;
}

std::optional<uint64_t> ParseSpanId(absl::string_view hex) {
  return Hex64(hex);
}

std::optional<std::pair<uint64_t, uint64_t>> ParseTraceId(
    absl::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  std::optional<uint64_t> hi = Hex64(hex.substr(0, 16));
  std::optional<uint64_t> lo = Hex64(hex.substr(16));
  if (!hi || !lo || (*hi | *lo) == 0) return std::nullopt;
  return std::make_pair(*hi, *lo);
}

}  // namespace ferry
