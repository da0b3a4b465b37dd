// The RRef suite: remote()+to_here latency, RRef create+release rate, and
// the same through a user→user fork (the RRef passed to a third worker,
// which fetches it).
#ifndef FERRY_TOOLS_BENCH_RREF_BENCH_H_
#define FERRY_TOOLS_BENCH_RREF_BENCH_H_

#include "absl/status/status.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

absl::Status RunRRefSuite(bool quick, Report* report);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_RREF_BENCH_H_
