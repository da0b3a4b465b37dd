// The CPU time this process has used, all threads together (user and
// system): what ferry_bench reports beside wall times, since on a starved
// host a fixed cost per message hides in the wall time but not here.
#ifndef FERRY_TOOLS_BENCH_CPU_CLOCK_H_
#define FERRY_TOOLS_BENCH_CPU_CLOCK_H_

#include "absl/time/time.h"

namespace ferry {
namespace bench {

// getrusage(RUSAGE_SELF): user + system time of every thread so far.
absl::Duration ProcessCpuTime();

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_CPU_CLOCK_H_
