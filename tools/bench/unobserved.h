// A worker without what lets one look inside it (README "Observing a
// job"): no flight recorder entries (the groups' watermarks stay), no
// metrics counted, no trace context carried — ferry_bench's baseline for
// what they cost (--unobserved).
#ifndef FERRY_TOOLS_BENCH_UNOBSERVED_H_
#define FERRY_TOOLS_BENCH_UNOBSERVED_H_

#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace bench {

inline void Unobserved(WorkerConfig& w) {
  w.collectives.flight_recorder_entries = 0;
  w.telemetry.metrics = false;
  w.telemetry.tracing = false;
}

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_UNOBSERVED_H_
