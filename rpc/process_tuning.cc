#include "rpc/process_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/synchronization/mutex.h"

namespace ferry {

void TuneProcessForServing() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Large buffers come from the heap (never mmap) and stay there for reuse:
  // glibc caps its mmap threshold at 32 MiB, so without this every larger
  // message would be mapped and faulted in afresh.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void ExitProcess(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace ferry
