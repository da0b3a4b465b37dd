#include "tools/bench/cpu_clock.h"

#include <sys/resource.h>

namespace ferry {
namespace bench {

absl::Duration ProcessCpuTime() {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0) return absl::ZeroDuration();
  return absl::DurationFromTimeval(u.ru_utime) +
         absl::DurationFromTimeval(u.ru_stime);
}

}  // namespace bench
}  // namespace ferry
