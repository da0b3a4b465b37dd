// Cancellation: how running work learns that nobody waits for it any more
// (its caller went away, its deadline passed, the worker is stopping).
//
//   // The call's side (the server):
//   auto cancel = std::make_shared<Cancellation>();
//   … cancel->Cancel(absl::CancelledError("the caller went away"));
//
//   // The work's side (a function, a nested call, a collective wait):
//   Cancellation::Id id = cancel->OnCancel([timer] { timers->Cancel(timer); });
//   … on normal completion: cancel->Remove(id);
//
// Contracts:
// - Cancel() happens at most once; its callbacks run exactly once each, on
//   the thread that cancels, outside any lock. OnCancel() on a cancelled
//   object runs the callback at once, inline, and returns 0.
// - Remove() forgets a callback that has not run (true) so long-lived work
//   that registers many short waits does not accumulate them.
// - Callbacks must be quick and must not block: hand work to an executor.
#ifndef FERRY_RPC_BASE_CANCELLATION_H_
#define FERRY_RPC_BASE_CANCELLATION_H_

#include <atomic>
#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

class Cancellation {
 public:
  using Id = uint64_t;
  using Callback = absl::AnyInvocable<void() &&>;

  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Registers `cb` to run on Cancel(); runs it now (returning 0) if the
  // work is already cancelled.
  Id OnCancel(Callback cb) ABSL_LOCKS_EXCLUDED(mu_);
  // True if `id` was registered and had not run; it never will now.
  bool Remove(Id id) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels with `reason` (the first reason wins); false if already done.
  bool Cancel(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);

  bool cancelled() const { return cancelled_.load(); }
  // The reason given to Cancel(), or OK while not cancelled.
  absl::Status reason() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
  Id next_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<Id, Callback> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_BASE_CANCELLATION_H_
