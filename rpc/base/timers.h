// One thread that runs callbacks at given times: heartbeats, retries with
// backoff, deadlines, sleep_ms. Callbacks run outside the lock, one at a
// time; keep them short and hand real work to an Executor.
#ifndef FERRY_RPC_BASE_TIMERS_H_
#define FERRY_RPC_BASE_TIMERS_H_

#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

class Timers {
 public:
  using TimerId = uint64_t;
  using Callback = absl::AnyInvocable<void() &&>;

  Timers();
  // Stops; pending callbacks are dropped.
  ~Timers();

  Timers(const Timers&) = delete;
  Timers& operator=(const Timers&) = delete;

  // Runs `cb` at (or soon after) `when`. After Stop() the callback is
  // dropped and 0 returned.
  TimerId RunAt(absl::Time when, Callback cb) ABSL_LOCKS_EXCLUDED(mu_);
  TimerId RunAfter(absl::Duration delay, Callback cb) ABSL_LOCKS_EXCLUDED(mu_) {
    return RunAt(absl::Now() + delay, std::move(cb));
  }

  // True if the timer was pending and will now never run.
  bool Cancel(TimerId id) ABSL_LOCKS_EXCLUDED(mu_);

  // Drops pending callbacks, waits for a running one, joins the thread.
  // Must not be called from a timer callback.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  // Ordered by (time, id) so equal times run in submission order.
  std::map<std::pair<absl::Time, TimerId>, Callback> queue_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TimerId, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar wake_;
  std::thread thread_;
};

}  // namespace ferry

#endif  // FERRY_RPC_BASE_TIMERS_H_
