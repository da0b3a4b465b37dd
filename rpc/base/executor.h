// A fixed pool of threads running queued tasks: where registered functions
// execute, so gRPC's own threads never run user code.
#ifndef FERRY_RPC_BASE_EXECUTOR_H_
#define FERRY_RPC_BASE_EXECUTOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

class Executor {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // Starts `threads` (>= 1) threads. At most `max_queued` tasks wait for
  // a thread (0 = no bound): a peer's flood of work is refused, not queued
  // without end.
  explicit Executor(int threads, int64_t max_queued = 0);
  // Stop() without a timeout.
  ~Executor();

  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues `task`. On refusal the task is dropped (never run): UNAVAILABLE
  // after Stop(); RESOURCE_EXHAUSTED naming --max_queued_tasks when
  // `max_queued` tasks already wait.
  absl::Status TrySubmit(Task task);
  // TrySubmit(task).ok().
  bool Submit(Task task) { return TrySubmit(std::move(task)).ok(); }

  // Refuses new tasks, lets queued and running ones finish, joins the
  // threads. If they are not done within `timeout` (a function that never
  // returns), they are detached: they keep only shared state alive, so the
  // executor can still be destroyed. Must not be called from a task.
  void Stop(absl::Duration timeout = absl::InfiniteDuration());

  int64_t queued() const;
  int64_t running() const;

 private:
  struct Shared {
    mutable absl::Mutex mu;
    std::deque<Task> queue ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    int64_t running ABSL_GUARDED_BY(mu) = 0;
    int live ABSL_GUARDED_BY(mu) = 0;
  };

  static void Loop(std::shared_ptr<Shared> shared);

  const std::shared_ptr<Shared> shared_;
  const int64_t max_queued_;
  std::vector<std::thread> threads_;  // Owned by Stop() once started.
  bool stopped_ = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_BASE_EXECUTOR_H_
