// Reports nodes that leave or die without letting churn flood the log: a
// token holder can register and drop clients at ~2000 a second, and a
// line each on every worker is a denial of service on its own.
//
// The first departure after a quiet spell is reported at once, as it is;
// the later ones within `interval` are only counted, and reported as one
// summary line when the interval ends ("37 more clients left or died in
// the last 10 s; the latest: …"). So a worker writes at most one line per
// interval about them, however many come and go.
//
//   ChurnLog churn(&timers, absl::Seconds(10),
//                  [](absl::string_view line) { Log("peer_down", line); });
//   churn.Departed("client7: client7 left the job");
#ifndef FERRY_RPC_CHURN_LOG_H_
#define FERRY_RPC_CHURN_LOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/timers.h"

namespace ferry {

class ChurnLog {
 public:
  // Called with each line, outside any lock, on the caller's thread or a
  // timer's; must be thread-safe.
  using Report = std::function<void(absl::string_view line)>;

  // `timers` must outlive the ChurnLog's last timer (Stop() first).
  ChurnLog(Timers* timers, absl::Duration interval, Report report);
  ~ChurnLog();

  // One node left or died: `line` says which and why.
  void Departed(absl::string_view line) ABSL_LOCKS_EXCLUDED(state_->mu);
  // No line after this returns; a summary still pending is dropped.
  void Stop() ABSL_LOCKS_EXCLUDED(state_->mu);

 private:
  // Shared with the pending timer, which may outlive this object.
  struct State {
    absl::Mutex mu;
    bool stopped ABSL_GUARDED_BY(mu) = false;
    // Until when departures are only counted (after a reported one).
    absl::Time quiet_until ABSL_GUARDED_BY(mu) = absl::InfinitePast();
    int64_t held_back ABSL_GUARDED_BY(mu) = 0;
    std::string latest ABSL_GUARDED_BY(mu);
    Timers::TimerId timer ABSL_GUARDED_BY(mu) = 0;
    // A summary being reported now (Stop waits for it).
    bool reporting ABSL_GUARDED_BY(mu) = false;
  };
  static void Flush(const std::shared_ptr<State>& state,
                    absl::Duration interval, const Report& report);

  Timers* const timers_;
  const absl::Duration interval_;
  const Report report_;
  const std::shared_ptr<State> state_;
};

}  // namespace ferry

#endif  // FERRY_RPC_CHURN_LOG_H_
