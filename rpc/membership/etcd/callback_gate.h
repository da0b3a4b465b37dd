// Lets a component promise "after Close() returns, my callback never runs
// again" without running the callback under its own lock:
//
//   if (gate_.Enter()) { on_event_(e); gate_.Exit(); }   // any thread
//   gate_.Close(absl::Seconds(5));                        // in Stop()
//
// Close() waits (bounded) for a callback that is running on another thread;
// called from inside the callback itself it does not wait for that one.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_CALLBACK_GATE_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_CALLBACK_GATE_H_

#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

class CallbackGate {
 public:
  // Whether the callback may run now; if true, call Exit() after it.
  bool Enter() ABSL_LOCKS_EXCLUDED(mu_);
  void Exit() ABSL_LOCKS_EXCLUDED(mu_);

  // No callback enters from now on; waits up to `timeout` for those inside
  // (other than the calling thread's). False if one was still inside.
  bool Close(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // The threads inside a callback now (a thread may appear more than once).
  std::vector<std::thread::id> inside_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_CALLBACK_GATE_H_
