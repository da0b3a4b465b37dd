// StacksService: what `ferry.stacks` answers, made where no peer can
// starve the worker with it. A capture signals every thread and names
// every frame (milliseconds a thread): asked for in a loop by many
// callers on the executor, it took an honest `add` from 0.7 ms to 564 ms
// (issue 49 R7). So captures
//
//   - run on a thread of their own, never on the executor or a gRPC
//     thread (the function is registered run_inline and only waits);
//   - run one at a time: a request while one runs gets that capture;
//   - start at most once per `min_interval`: a request within it of the
//     last capture's end gets that capture again (stale by at most that).
//
//   StacksService stacks({.capture = [&] { return StacksValue(); }});
//   Future<Value> v = stacks.Get();
//
// Who may ask is the registrant's to check (the agent: clients only).
// Thread-safe; the destructor waits for a capture under way and answers
// the requests still waiting UNAVAILABLE.
#ifndef FERRY_RPC_STACKS_SERVICE_H_
#define FERRY_RPC_STACKS_SERVICE_H_

#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"

namespace ferry {

class StacksService {
 public:
  struct Options {
    // Makes one answer (on the service's thread). Required.
    std::function<Value()> capture;
    absl::Duration min_interval = absl::Seconds(1);
    Clock* clock = Clock::Real();
  };

  explicit StacksService(Options options);
  ~StacksService();
  StacksService(const StacksService&) = delete;
  StacksService& operator=(const StacksService&) = delete;

  // The capture under way, the last one (if it ended within
  // min_interval), or a new one.
  Future<Value> Get() ABSL_LOCKS_EXCLUDED(mu_);
  // Captures made so far.
  int64_t captures() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool capturing_ ABSL_GUARDED_BY(mu_) = false;
  // Requests for the capture under way or the next one.
  std::vector<Promise<Value>> waiting_ ABSL_GUARDED_BY(mu_);
  std::optional<Value> last_ ABSL_GUARDED_BY(mu_);
  absl::Time last_end_ ABSL_GUARDED_BY(mu_);
  int64_t captures_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;  // Last: starts once the rest is built.
};

}  // namespace ferry

#endif  // FERRY_RPC_STACKS_SERVICE_H_
