// The collectives suite: time per op of all_to_all_single, all_gather,
// all_reduce and broadcast at per-rank sizes 8 B, 64 KiB, 1 MiB and 16 MiB,
// world sizes 2 and 4 — ferry's in-process workers against Gloo's, both
// over TCP on 127.0.0.1, measured in interleaved rounds (medians).
#ifndef FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_
#define FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

struct CollectiveSuiteOptions {
  bool quick = false;
  int rounds = 3;
  // ferry's threshold between direct and ring/tree algorithms; 0: default.
  int64_t direct_bytes = 0;
  std::string only_op;  // Just this collective.
  std::string system;   // Just "ferry" or "gloo".
};

absl::Status RunCollectiveSuite(const CollectiveSuiteOptions& options,
                                Report* report);

// For suites timing ops on in-process workers: rank r's op, with its
// buffers made outside the timing, and the timing itself — `iterations`
// ops on every rank at once after one warm-up each and a common start; the
// wall time per op.
using OneOp = std::function<absl::Status()>;
using MakeOp = std::function<absl::StatusOr<OneOp>(int rank)>;
absl::StatusOr<absl::Duration> TimeOnThreads(int world, int iterations,
                                             const MakeOp& make);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_
