// The collectives suite: time per op of all_to_all_single, all_gather,
// all_reduce and broadcast at per-rank sizes 8 B, 64 KiB, 1 MiB and 16 MiB,
// world sizes 2 and 4 — ferry's in-process workers against Gloo's, both
// over TCP on 127.0.0.1, measured in interleaved rounds (medians).
#ifndef FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_
#define FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
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

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_
