// Future/Promise: the result of asynchronous work, as a StatusOr.
//
//   Promise<Value> p;
//   Future<Value> f = p.future();
//   f.Then([](const absl::StatusOr<Value>& v) { … });   // runs once set
//   p.Set(Value(42));
//   absl::StatusOr<Value> v = f.Wait(absl::Seconds(5));  // bounded wait
//
// Contracts:
// - A promise is set at most once; later Set calls are ignored (and return
//   false), so racing completions (result vs. timeout vs. peer death) are
//   safe.
// - Then-callbacks run exactly once, outside any lock: inline in Then() if
//   the result is already there, otherwise on the thread that calls Set().
//   Keep them short or hand work to an executor; never block in them.
// - Wait() always has a bound; on expiry it returns DEADLINE_EXCEEDED and
//   the future stays usable.
#ifndef FERRY_RPC_BASE_FUTURE_H_
#define FERRY_RPC_BASE_FUTURE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/variant.h"

namespace ferry {

// The value type of futures that only signal completion.
using Done = absl::monostate;

namespace future_internal {

template <typename T>
class State {
 public:
  using Callback = absl::AnyInvocable<void(const absl::StatusOr<T>&) &&>;

  bool Set(absl::StatusOr<T> result) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<Callback> callbacks;
    {
      absl::MutexLock lock(&mu_);
      if (result_.has_value()) return false;
      result_.emplace(std::move(result));
      callbacks.swap(callbacks_);
    }
    for (Callback& cb : callbacks) std::move(cb)(Settled());
    return true;
  }

  void Then(Callback cb) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!result_.has_value()) {
        callbacks_.push_back(std::move(cb));
        return;
      }
    }
    std::move(cb)(Settled());
  }

  bool IsReady() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return result_.has_value();
  }

  std::optional<absl::StatusOr<T>> WaitFor(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return result_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    return result_;
  }

 private:
  // The result once set. It is never modified again after Set, so reading
  // it without the lock is safe (the analysis cannot see that ordering).
  const absl::StatusOr<T>& Settled() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return *result_;
  }

  mutable absl::Mutex mu_;
  std::optional<absl::StatusOr<T>> result_ ABSL_GUARDED_BY(mu_);
  std::vector<Callback> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace future_internal

template <typename T>
class Future {
 public:
  // An invalid future; only assignment and valid() may be used.
  Future() = default;

  static Future Ready(absl::StatusOr<T> result) {
    Future f(std::make_shared<future_internal::State<T>>());
    f.state_->Set(std::move(result));
    return f;
  }

  bool valid() const { return state_ != nullptr; }
  bool IsReady() const { return state_->IsReady(); }

  // Waits at most `timeout` (absl::InfiniteDuration() only where the caller
  // chose "no timeout"). DEADLINE_EXCEEDED if the result is not there.
  absl::StatusOr<T> Wait(absl::Duration timeout) const {
    std::optional<absl::StatusOr<T>> r = state_->WaitFor(timeout);
    if (!r.has_value()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no result within ", absl::ToInt64Milliseconds(timeout), " ms"));
    }
    return *std::move(r);
  }

  // Runs `cb(result)` once the result is set (see the contracts above).
  void Then(absl::AnyInvocable<void(const absl::StatusOr<T>&) &&> cb) const {
    state_->Then(std::move(cb));
  }

  // A future of `fn(result)`, computed where Then-callbacks run.
  template <typename F, typename U = typename std::invoke_result_t<
                            F, const absl::StatusOr<T>&>::value_type>
  Future<U> Map(F fn) const;

 private:
  template <typename>
  friend class Promise;
  explicit Future(std::shared_ptr<future_internal::State<T>> s)
      : state_(std::move(s)) {}

  std::shared_ptr<future_internal::State<T>> state_;
};

template <typename T>
class Promise {
 public:
  Promise() : state_(std::make_shared<future_internal::State<T>>()) {}

  Future<T> future() const { return Future<T>(state_); }

  // Sets the result; false (and no effect) if it was already set.
  bool Set(absl::StatusOr<T> result) const {
    return state_->Set(std::move(result));
  }

 private:
  std::shared_ptr<future_internal::State<T>> state_;
};

template <typename T>
template <typename F, typename U>
Future<U> Future<T>::Map(F fn) const {
  Promise<U> p;
  Then([p, fn = std::move(fn)](const absl::StatusOr<T>& r) mutable {
    p.Set(fn(r));
  });
  return p.future();
}

// Resolves when every future in `all` did, or with the first error.
inline Future<Done> WhenAll(std::vector<Future<Done>> all) {
  if (all.empty()) return Future<Done>::Ready(Done());
  Promise<Done> done;
  auto left = std::make_shared<std::atomic<size_t>>(all.size());
  for (const Future<Done>& f : all) {
    f.Then([done, left](const absl::StatusOr<Done>& r) {
      if (!r.ok()) {
        done.Set(r.status());
      } else if (left->fetch_sub(1) == 1) {
        done.Set(Done());
      }
    });
  }
  return done.future();
}

}  // namespace ferry

#endif  // FERRY_RPC_BASE_FUTURE_H_
