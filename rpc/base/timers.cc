#include "rpc/base/timers.h"

#include <algorithm>

namespace ferry {

namespace {
// The longest the timer thread waits before reading its clock again. This
// Abseil ends its waits by the wall clock, so a wall step backwards would
// stretch a wait; waking at least this often keeps timers on the steady
// clock, late by at most this much after such a step.
constexpr absl::Duration kMaxWait = absl::Milliseconds(100);
}  // namespace

// ---- TimerQueue ----

TimerQueue::TimerId TimerQueue::Add(absl::Time when, Callback cb) {
  TimerId id = next_id_++;
  queue_.emplace(std::make_pair(when, id), std::move(cb));
  when_.emplace(id, when);
  return id;
}

TimerQueue::Callback TimerQueue::Remove(TimerId id) {
  auto it = when_.find(id);
  if (it == when_.end()) return nullptr;
  auto node = queue_.extract(std::make_pair(it->second, id));
  when_.erase(it);
  return std::move(node.mapped());
}

TimerQueue::Callback TimerQueue::PopDue(absl::Time now) {
  if (queue_.empty() || now < next()) return nullptr;
  auto first = queue_.begin();
  Callback cb = std::move(first->second);
  when_.erase(first->first.second);
  queue_.erase(first);
  return cb;
}

std::map<std::pair<absl::Time, TimerQueue::TimerId>, TimerQueue::Callback>
TimerQueue::TakeAll() {
  when_.clear();
  return std::exchange(queue_, {});
}

// ---- ThreadTimers ----

ThreadTimers::ThreadTimers(Clock* clock)
    : clock_(clock), thread_([this] { Loop(); }) {}

ThreadTimers::~ThreadTimers() { ThreadTimers::Stop(); }

Timers::TimerId ThreadTimers::RunAt(absl::Time when, Callback cb) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return 0;
  // Wake the thread only for a time before it would look again by itself:
  // every call arms a deadline, and waking the thread for each (to find
  // nothing due) cost a context switch per call.
  if (when < wake_at_) wake_.Signal();
  return queue_.Add(when, std::move(cb));
}

bool ThreadTimers::Cancel(TimerId id) {
  Callback dropped;  // Destroyed after unlocking: it may own anything.
  absl::MutexLock lock(&mu_);
  dropped = queue_.Remove(id);
  return dropped != nullptr;
}

void ThreadTimers::Stop() {
  std::map<std::pair<absl::Time, TimerId>, Callback> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped = queue_.TakeAll();
    wake_.Signal();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

ThreadTimers::Callback ThreadTimers::NextDue() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = clock_->Now();
    Callback cb = queue_.PopDue(now);
    if (cb != nullptr) {
      wake_at_ = absl::InfinitePast();  // Looks again before waiting.
      return cb;
    }
    // RunAt (for a timer before wake_at_) and Stop signal, so an earlier
    // timer or a stop wakes us. The wait is relative to the (monotonic)
    // clock, and sliced (kMaxWait).
    if (queue_.empty()) {
      wake_at_ = absl::InfiniteFuture();
      wake_.Wait(&mu_);
    } else {
      const absl::Duration wait = std::min(queue_.next() - now, kMaxWait);
      wake_at_ = now + wait;
      wake_.WaitWithTimeout(&mu_, wait);
    }
  }
  return nullptr;
}

void ThreadTimers::Loop() {
  while (Callback cb = NextDue()) {
    std::move(cb)();  // Outside the lock; its captures die here too.
  }
}

}  // namespace ferry
