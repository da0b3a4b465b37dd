// W3C trace context (https://www.w3.org/TR/trace-context/): which trace a
// piece of work belongs to and which span is its parent, as the
// `traceparent` header carries it:
//
//   traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//                ^  ^ trace id (16 bytes)            ^ parent span   ^ flags
//
// Every call, nested call, remote, RRef message and collective message
// carries one (a call in its request, in the binary form of
// rpc/base/trace_binary.h; the others in gRPC metadata, rpc/tracing.h);
// the work a thread does for a call runs under that call's context
// (CurrentTrace), so calls it makes continue the trace without being told.
// The header's text form is rpc/base/traceparent.h.
#ifndef FERRY_RPC_BASE_TRACE_CONTEXT_H_
#define FERRY_RPC_BASE_TRACE_CONTEXT_H_

#include <cstdint>
#include <string>

namespace ferry {

struct TraceContext {
  uint64_t trace_hi = 0;  // The 128-bit trace id; all zero: no trace.
  uint64_t trace_lo = 0;
  uint64_t span_id = 0;  // The span this context stands for; 0: none.
  bool sampled = false;  // The trace's spans are wanted (flag 01).

  bool valid() const { return (trace_hi | trace_lo) != 0 && span_id != 0; }
  // The trace id as 32 lower-case hex digits.
  std::string trace_id() const;
  // A new span of the same trace (a fresh span id).
  TraceContext Child() const;
};

// A new trace with a random id (and a random root span id).
TraceContext NewTrace(bool sampled);
// A random, non-zero span id.
uint64_t NewSpanId();

// The context of the work this thread does now (invalid if none).
const TraceContext& CurrentTrace();

// Makes `context` this thread's current one until destroyed.
class ScopedTrace {
 public:
  explicit ScopedTrace(const TraceContext& context);
  ~ScopedTrace();
  ScopedTrace(const ScopedTrace&) = delete;
  ScopedTrace& operator=(const ScopedTrace&) = delete;

 private:
  TraceContext saved_;
};

}  // namespace ferry

#endif  // FERRY_RPC_BASE_TRACE_CONTEXT_H_
