#include "rpc/churn_log.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

ChurnLog::ChurnLog(Timers* timers, absl::Duration interval, Report report)
    : timers_(timers),
      interval_(interval),
      report_(std::move(report)),
      state_(std::make_shared<State>()) {}

ChurnLog::~ChurnLog() { Stop(); }

void ChurnLog::Departed(absl::string_view line) {
  const absl::Time now = timers_->clock()->Now();
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->stopped) return;
    if (now < state_->quiet_until) {
      ++state_->held_back;
      state_->latest = std::string(line);
      if (state_->timer == 0) {
        // The summary when the interval ends. The timer holds the state,
        // not this object, and reports nothing once it was stopped.
        std::weak_ptr<State> weak = state_;
        const absl::Duration interval = interval_;
        Report report = report_;
        state_->timer = timers_->RunAt(
            state_->quiet_until, [weak, interval, report = std::move(report)] {
              if (auto state = weak.lock()) Flush(state, interval, report);
            });
      }
      return;
    }
    state_->quiet_until = now + interval_;
  }
  report_(line);
}

void ChurnLog::Flush(const std::shared_ptr<State>& state,
                     absl::Duration interval, const Report& report) {
  std::string line;
  {
    absl::MutexLock lock(&state->mu);
    state->timer = 0;
    if (state->stopped || state->held_back == 0) return;
    line = absl::StrCat(
        state->held_back, " more ", state->held_back == 1 ? "node" : "nodes",
        " left or died in the last ", absl::FormatDuration(interval),
        " (one line per interval); the latest: ", state->latest);
    state->held_back = 0;
    state->latest.clear();
    // The next interval starts with this line: departures in it are
    // counted again, so the log stays at a line per interval.
    state->quiet_until += interval;
    state->reporting = true;
  }
  report(line);
  absl::MutexLock lock(&state->mu);
  state->reporting = false;
}

void ChurnLog::Stop() {
  Timers::TimerId timer;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopped = true;
    timer = std::exchange(state_->timer, 0);
  }
  if (timer != 0) timers_->Cancel(timer);
  // A summary on its way out is a real event a moment away: wait for it,
  // so no line follows Stop.
  State* state = state_.get();
  absl::MutexLock lock(&state->mu);
  state->mu.AwaitWithTimeout(absl::Condition(
                                 +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                      s->mu) { return !s->reporting; },
                                 state),
                             absl::Seconds(5));
}

}  // namespace ferry
