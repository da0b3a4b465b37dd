// A one-line progress report on the terminal, rewritten in place, for
// operations that take a while (ferryctl up, collectives, ferry_bench).
// It is shown only when stdout and stderr are both terminals: in scripts,
// pipes and tests it writes nothing at all.
//
//   Progress progress;
//   progress.Update("starting 4 workers: 2 ready");
//   {
//     Progress::Ticker t(progress, "all_reduce on 4 workers");  // "… 1.2 s"
//     Run();
//   }
#ifndef FERRY_TOOLS_PROGRESS_H_
#define FERRY_TOOLS_PROGRESS_H_

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace ferry {

class Progress {
 public:
  Progress();
  // Clears the line.
  ~Progress();

  bool enabled() const { return enabled_; }
  // Replaces the line with `text` (on stderr).
  void Update(absl::string_view text) ABSL_LOCKS_EXCLUDED(mu_);
  // Clears the line.
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

  // While alive, shows "<label>… <seconds> s" every tenth of a second.
  class Ticker {
   public:
    Ticker(Progress& progress, std::string label);
    ~Ticker();

   private:
    Progress& progress_;
    absl::Notification done_;
    std::thread thread_;
  };

 private:
  const bool enabled_;
  absl::Mutex mu_;
  bool shown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_TOOLS_PROGRESS_H_
