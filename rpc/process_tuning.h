// Process-wide settings for ferry's binaries (ferryd, ferryctl,
// ferry_bench). Libraries do not call this: it changes global behaviour.
#ifndef FERRY_RPC_PROCESS_TUNING_H_
#define FERRY_RPC_PROCESS_TUNING_H_

namespace ferry {

// - Turns off Abseil's mutex deadlock detection: a debugging aid (on in
//   Debian's build) that updates a lock graph on every lock; tests keep it.
// - Keeps glibc malloc from returning and re-mapping large buffers on every
//   message (fresh pages fault in at a few hundred MB/s).
void TuneProcessForServing();

}  // namespace ferry

#endif  // FERRY_RPC_PROCESS_TUNING_H_
