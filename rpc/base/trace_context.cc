#include "rpc/base/trace_context.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"

namespace ferry {

namespace {

thread_local TraceContext current;

// Random bits from a generator per thread (no lock on the call path).
uint64_t RandomBits() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

bool LowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::optional<uint64_t> Hex64(absl::string_view s) {
  if (s.size() != 16 || !LowerHex(s)) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) v = v << 4 | (c <= '9' ? c - '0' : c - 'a' + 10);
  return v;
}

}  // namespace

std::string TraceContext::trace_id() const {
  return absl::StrFormat("%016x%016x", trace_hi, trace_lo);
}

TraceContext TraceContext::Child() const {
  TraceContext c = *this;
  c.span_id = NewSpanId();
  return c;
}

uint64_t NewSpanId() {
  uint64_t id;
  do {
    id = RandomBits();
  } while (id == 0);
  return id;
}

TraceContext NewTrace(bool sampled) {
  TraceContext c;
  do {
    c.trace_hi = RandomBits();
    c.trace_lo = RandomBits();
  } while ((c.trace_hi | c.trace_lo) == 0);
  c.span_id = NewSpanId();
  c.sampled = sampled;
  return c;
}

std::string FormatTraceparent(const TraceContext& c) {
  return absl::StrFormat("00-%016x%016x-%016x-%s", c.trace_hi, c.trace_lo,
                         c.span_id, c.sampled ? "01" : "00");
}

std::optional<TraceContext> ParseTraceparent(absl::string_view h) {
  // version "00": exactly 2+1+32+1+16+1+2 = 55 characters.
  if (h.size() != 55 || h.substr(0, 3) != "00-" || h[35] != '-' ||
      h[52] != '-') {
    return std::nullopt;
  }
  std::optional<uint64_t> hi = Hex64(h.substr(3, 16));
  std::optional<uint64_t> lo = Hex64(h.substr(19, 16));
  std::optional<uint64_t> span = Hex64(h.substr(36, 16));
  absl::string_view flags = h.substr(53, 2);
  if (!hi || !lo || !span || !LowerHex(flags)) return std::nullopt;
  TraceContext c{*hi, *lo, *span, false};
  if (!c.valid()) return std::nullopt;
  const int f = (flags[0] <= '9' ? flags[0] - '0' : flags[0] - 'a' + 10) * 16 +
                (flags[1] <= '9' ? flags[1] - '0' : flags[1] - 'a' + 10);
  c.sampled = (f & 1) != 0;
  return c;
}

std::string SpanIdHex(uint64_t span_id) {
  return absl::StrFormat("%016x", span_id);
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

const TraceContext& CurrentTrace() { return current; }

ScopedTrace::ScopedTrace(const TraceContext& context) : saved_(current) {
  current = context;
}

ScopedTrace::~ScopedTrace() { current = saved_; }

}  // namespace ferry
