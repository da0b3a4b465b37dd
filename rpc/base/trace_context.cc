#include "rpc/base/trace_context.h"

#include <cstdint>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

thread_local TraceContext current;

// Ids need to be unique, not secret: a splitmix64 stream per thread,
// seeded once from absl's generator (a few ns a draw, no lock).
uint64_t RandomBits() {
  thread_local uint64_t state = absl::Uniform<uint64_t>(absl::BitGen());
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::string TraceContext::trace_id() const {
  return absl::StrCat(absl::Hex(trace_hi, absl::kZeroPad16),
                      absl::Hex(trace_lo, absl::kZeroPad16));
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

const TraceContext& CurrentTrace() { return current; }

ScopedTrace::ScopedTrace(const TraceContext& context) : saved_(current) {
  current = context;
}

ScopedTrace::~ScopedTrace() { current = saved_; }

}  // namespace ferry
