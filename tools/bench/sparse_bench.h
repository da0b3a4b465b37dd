// The sparse suite: SparseFeaturesAllToAll on a DLRM-shaped input — 26
// id-list features, batch 2048 per rank, ~20 ids per sample and feature —
// on 4 ranks (and 2): time per op.
#ifndef FERRY_TOOLS_BENCH_SPARSE_BENCH_H_
#define FERRY_TOOLS_BENCH_SPARSE_BENCH_H_

#include "absl/status/status.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

absl::Status RunSparseSuite(bool quick, int rounds, Report* report);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_SPARSE_BENCH_H_
