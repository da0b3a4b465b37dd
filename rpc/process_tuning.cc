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
  // One arena: glibc's per-thread arenas grow in heaps of at most 64 MiB,
  // and a larger block asked for on such a thread (a gRPC poller decoding
  // a 64 MiB message) is mmap'd and unmapped regardless of M_MMAP_MAX:
  // every such message faulted in afresh (64 MiB echo at 130-160 MB/s,
  // 600-1050 MB/s with one arena, bare gRPC alike). Small blocks still come
  // from each thread's cache; the arena's lock is taken only past it.
  mallopt(M_ARENA_MAX, 1);
}

void ExitProcess(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace ferry
