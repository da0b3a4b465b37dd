// Where the flight recorder's dumps go when an op fails: one file per
// worker, <dir>/worker<rank>.json — named by rank, never by the worker's
// name (a peer's words are no path) —, each dump replacing the worker's
// last (the newest failure is what an operator looks at; `ferryctl
// analyze DIR` reads every worker's file of the job).
//
// Dumps are written off the op's thread (on the executor), and coalesced:
// while one is being written, further requests make one more dump after
// it, of the state then — so a burst of failures costs two writes, and the
// last dump always holds the last failure.
#ifndef FERRY_COLLECTIVES_RECORDER_FLIGHT_DUMPS_H_
#define FERRY_COLLECTIVES_RECORDER_FLIGHT_DUMPS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rpc/base/executor.h"
#include "rpc/value/value.h"

namespace ferry {

// "worker<rank>.json": the file of rank `rank`'s dumps.
std::string DumpFileName(int rank);

// Writes `dump` (a DumpValue) as JSON to <dir>/DumpFileName(rank),
// creating `dir` (0700) if missing; via a temporary file and a rename, so a
// reader never sees half a dump. UNAVAILABLE naming the path on failure.
absl::Status WriteDumpFile(const std::string& dir, int rank, const Value& dump);

class FlightDumps : public std::enable_shared_from_this<FlightDumps> {
 public:
  // `make(reason)` builds a dump of the recorder now (null: none). Held by
  // a shared_ptr: a queued write keeps it alive.
  FlightDumps(std::string dir, int rank, Executor* executor,
              std::function<Value(const std::string& reason)> make);

  // Asks for a dump because of `reason` (an op's failure); returns at once.
  // Nothing if the executor refuses the task (the worker is stopping).
  void Request(std::string reason) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& dir() const { return dir_; }

 private:
  void WriteLoop(std::string reason) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string dir_;
  const int rank_;
  Executor* const executor_;
  const std::function<Value(const std::string&)> make_;

  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<std::string> again_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_RECORDER_FLIGHT_DUMPS_H_
