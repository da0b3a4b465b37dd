// Process-wide settings for ferry's binaries (ferryd, ferryctl,
// ferry_bench). Libraries do not call this: it changes global behaviour.
#ifndef FERRY_RPC_PROCESS_TUNING_H_
#define FERRY_RPC_PROCESS_TUNING_H_

namespace ferry {

// - Turns off Abseil's mutex deadlock detection: a debugging aid (on in
//   Debian's build) that updates a lock graph on every lock; tests keep it.
// - Keeps glibc malloc from returning and re-mapping large buffers on every
//   message (fresh pages fault in at a few hundred MB/s): no mmap, a high
//   trim threshold, one arena.
void TuneProcessForServing();

// Ends the process with `code` once main's work is done and everything it
// owns is released: flushes stdio, then _exit — skipping static
// destructors, which would run while gRPC's own background threads (the
// callback completion queue's pollers) are still winding down; under
// AddressSanitizer that race showed as a double free at exit.
[[noreturn]] void ExitProcess(int code);

}  // namespace ferry

#endif  // FERRY_RPC_PROCESS_TUNING_H_
