// Spans: what each worker did for a trace (rpc/base/trace_context.h), and
// the trace context in gRPC metadata: what RRef messages and collective
// streams carry, and what a caller that is not ferry may send with a call
// (ferry's own calls carry it in the request: proto/worker.proto).
//
// A worker records one span per call it serves (name: the function; its
// parent: the caller's span, from the call's trace context) and one per
// collective op (name: "<op> <key>"; parent: the span of the call it runs
// in, if any) — for traces that are sampled (a `ferryctl call --trace`)
// or, with --trace_file, for every trace. Spans are kept in a bounded ring
// (`ferry.trace` answers a trace's spans: how `ferryctl call --trace`
// prints the tree across workers) and, with a trace file, appended there
// as JSON lines:
//
//   {"name":"relay","trace_id":"4bf9…","span_id":"00f0…","parent_span_id":
//    "a3ce…","start_unix_nano":…,"duration_ns":…,"status":"OK",
//    "peer":"worker0","worker":"worker1","kind":"server"}
//
// Thread-safe. Recording takes one short lock (and a buffered write with
// a file); nothing is recorded for an unsampled trace without a file.
#ifndef FERRY_RPC_TRACING_H_
#define FERRY_RPC_TRACING_H_

#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "rpc/base/trace_context.h"
#include "rpc/value/value.h"

namespace ferry {

inline constexpr char kTraceparentKey[] = "traceparent";

struct Span {
  std::string name;
  TraceContext context;  // Its trace, and its own span id.
  uint64_t parent_span_id = 0;
  absl::Time start;  // Wall time.
  absl::Duration duration;
  std::string status;  // "OK", or a code name.
  std::string peer;    // Who called (server spans).
  std::string worker;  // Where it was recorded.
  std::string kind;    // "server" (a call served), "internal" (an op).
};

// The JSON line's fields (above), as a Value; SpanFromValue reads one
// back (INVALID_ARGUMENT for anything else).
Value SpanToValue(const Span& span);
absl::StatusOr<Span> SpanFromValue(const Value& v);

// `context` as a traceparent in `client`'s metadata (nothing if invalid).
void AddTraceparent(grpc::ClientContext* client, const TraceContext& context);
// The traceparent a call arrived with, if any and valid.
std::optional<TraceContext> TraceparentOf(
    const grpc::ServerContextBase& server);

// The context an outgoing message of this thread carries: `explicit_one`
// if valid, else the thread's current one, else a new trace (sampled if
// `sample_new`).
TraceContext OutgoingTrace(const TraceContext& explicit_one, bool sample_new);

class Tracer {
 public:
  // Spans' text fields (name, peer, status, kind) are kept and written
  // at most this long (cut with EchoPeerText, rpc/base/peer_text.h): a
  // name may be a peer's.
  static constexpr size_t kMaxFieldBytes = 256;

  struct Options {
    std::string worker;
    std::string trace_file;  // Empty: none.
    // Spans kept in memory: at most `keep`, and at most `keep_bytes` of
    // them (each counted as its text and its fixed part); the oldest go
    // first. Any caller may ask for a sampled trace, so these bound what
    // all callers together make a worker keep.
    size_t keep = 4096;
    size_t keep_bytes = size_t{4} << 20;
  };
  // UNAVAILABLE naming the file (and --trace_file) if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Tracer>> Open(Options options);
  ~Tracer();

  // Whether spans of `context` are recorded here.
  bool Records(const TraceContext& context) const {
    return context.valid() && (context.sampled || file_ != nullptr);
  }
  // Whether traces this worker starts are sampled (it writes a file).
  bool samples_new() const { return file_ != nullptr; }
  void Record(Span span) ABSL_LOCKS_EXCLUDED(mu_);
  // The kept spans of trace (hi, lo), oldest first.
  std::vector<Span> SpansOf(uint64_t trace_hi, uint64_t trace_lo) const
      ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& worker() const { return options_.worker; }

 private:
  Tracer(Options options, std::FILE* file);
  const Options options_;
  std::FILE* const file_;

  mutable absl::Mutex mu_;
  std::deque<Span> kept_ ABSL_GUARDED_BY(mu_);
  size_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // SpanBytes of kept_.
};

}  // namespace ferry

#endif  // FERRY_RPC_TRACING_H_
