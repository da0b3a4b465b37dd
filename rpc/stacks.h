// Every thread's stack in this process, symbolized, on demand (`ferryctl
// stacks`): each thread is asked, by a signal, to record its own return
// addresses; the caller then names them (absl::Symbolize, demangled).
// Threads blocked in a ferry wait say what they wait for (WaitNote).
//
//   std::vector<ThreadStack> threads = CaptureStacks();
//   {
//     WaitNote note("all_reduce op world/5");   // shown while in scope
//     result.Wait(timeout);
//   }
//
// The signal (SIGRTMIN+5; the handler is installed on first use) only
// makes the thread walk its own stack into a buffer; a thread that does
// not answer within the timeout (it blocks the signal, or exits) is
// listed without frames. One capture signals and records at a time (for
// as long as the threads take to answer); naming the frames, the slow
// part, holds no lock. Serving captures to peers is StacksService's
// (rpc/stacks_service.h): off the executor, one at a time, rate-limited.
#ifndef FERRY_RPC_STACKS_H_
#define FERRY_RPC_STACKS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ferry {

struct ThreadStack {
  int tid = 0;
  std::string name;                 // Its /proc comm ("grpcpp_sync_ser").
  std::vector<std::string> frames;  // Innermost first: "function+0x1c".
  bool captured = false;            // It answered in time.
  std::string waiting;              // Its WaitNote, if any.
};

std::vector<ThreadStack> CaptureStacks(
    absl::Duration timeout = absl::Seconds(2));

// Says, while in scope, what this thread waits for.
class WaitNote {
 public:
  explicit WaitNote(std::string what);
  ~WaitNote();
  WaitNote(const WaitNote&) = delete;
  WaitNote& operator=(const WaitNote&) = delete;

 private:
  std::string previous_;  // An enclosing note (restored at the end).
  bool had_previous_ = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_STACKS_H_
