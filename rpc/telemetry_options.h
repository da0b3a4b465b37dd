// What a worker tells about itself while it runs (README "Observing a
// job"): metrics, and trace context with spans. A plain struct, so the
// public API carries it without the implementation.
#ifndef FERRY_RPC_TELEMETRY_OPTIONS_H_
#define FERRY_RPC_TELEMETRY_OPTIONS_H_

#include <string>

namespace ferry {

struct TelemetryOptions {
  // Count calls, bytes and collectives (rpc/metrics.h); off, the worker's
  // `ferry.metrics` still answers, with the scrape-time gauges only.
  bool metrics = true;
  // Serve Prometheus' text format at http://HOST:PORT/metrics (port 0
  // picks one: WorkerStatus.metrics_address says which). Plain HTTP and
  // read-only; empty: not served (ferryctl status --format=prometheus
  // still reads the metrics through the job's own calls).
  std::string metrics_listen;
  // Carry a W3C trace context on every call (in the request), RRef message
  // and collective message (in gRPC metadata), and continue a caller's
  // (rpc/tracing.h).
  bool tracing = true;
  // Write every span this worker records as a JSON line here (appended);
  // empty: spans of sampled traces are kept in memory only, for
  // `ferryctl call --trace`.
  std::string trace_file;
};

}  // namespace ferry

#endif  // FERRY_RPC_TELEMETRY_OPTIONS_H_
