#include "rpc/base/trace_binary.h"

#include <cstdint>
#include <cstring>

#include "absl/base/config.h"

namespace ferry {

namespace {

// The binary form's layout: [0] version, [1] 0, [2..17] trace id, [18] 1,
// [19..26] span id, [27] 2, [28] flags.
constexpr int kBinTraceId = 2, kBinSpanId = 19, kBinFlags = 28;

// Byte order swapped with one instruction, not a loop of eight.
uint64_t BigEndian(uint64_t v) {
#ifdef ABSL_IS_LITTLE_ENDIAN
  return __builtin_bswap64(v);
#else
  return v;
#endif
}

void PutBigEndian64(uint64_t v, char* out) {
  v = BigEndian(v);
  std::memcpy(out, &v, sizeof v);
}

uint64_t BigEndian64At(const char* in) {
  uint64_t v;
  std::memcpy(&v, in, sizeof v);
  return BigEndian(v);
}

}  // namespace

std::string FormatTraceparentBinary(const TraceContext& c) {
  std::string out(kTraceparentBinarySize, '\0');
  out[kBinTraceId - 1] = 0;
  PutBigEndian64(c.trace_hi, &out[kBinTraceId]);
  PutBigEndian64(c.trace_lo, &out[kBinTraceId + 8]);
  out[kBinSpanId - 1] = 1;
  PutBigEndian64(c.span_id, &out[kBinSpanId]);
  out[kBinFlags - 1] = 2;
  out[kBinFlags] = c.sampled ? 1 : 0;
  return out;
}

std::optional<TraceContext> ParseTraceparentBinary(absl::string_view b) {
  if (b.size() != kTraceparentBinarySize || b[0] != 0 ||
      b[kBinTraceId - 1] != 0 || b[kBinSpanId - 1] != 1 ||
      b[kBinFlags - 1] != 2) {
    return std::nullopt;
  }
  TraceContext c{BigEndian64At(&b[kBinTraceId]),
                 BigEndian64At(&b[kBinTraceId + 8]),
                 BigEndian64At(&b[kBinSpanId]), (b[kBinFlags] & 1) != 0};
  if (!c.valid()) return std::nullopt;
  return c;
}

}  // namespace ferry
