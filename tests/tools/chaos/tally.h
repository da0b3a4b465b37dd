// What a chaos soak counts: faults injected by kind, operations by kind and
// outcome, and the invariants' violations (hangs, errors that name no
// worker, leaked RRefs, processes left behind, headless survivors,
// sanitizer reports). Thread-safe; printed as text and as JSON.
#ifndef FERRY_TESTS_TOOLS_CHAOS_TALLY_H_
#define FERRY_TESTS_TOOLS_CHAOS_TALLY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {
namespace chaos {

class Tally {
 public:
  // A counter under `section` ("faults", "ops", "violations", "jobs").
  void Add(const std::string& section, const std::string& key, int64_t n = 1)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One example (the first few are kept) of a violation, for the report.
  void Example(const std::string& violation, const std::string& text)
      ABSL_LOCKS_EXCLUDED(mu_);
  // An operation that ended: counted under "ops" as "<kind> <outcome>",
  // outcome "OK" or the status code's name.
  void Op(const std::string& kind, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t Get(const std::string& section, const std::string& key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The violations' total (the soak fails if it is not zero).
  int64_t Violations() const ABSL_LOCKS_EXCLUDED(mu_);

  std::string Text(absl::Duration ran) const ABSL_LOCKS_EXCLUDED(mu_);
  std::string Json(absl::Duration ran) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, int64_t>> counts_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::string>> examples_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace chaos
}  // namespace ferry

#endif  // FERRY_TESTS_TOOLS_CHAOS_TALLY_H_
