// ferryctl's commands for looking inside a running job (README "Observing
// a job"): flight recorder dumps and their analysis. Each returns the
// Value printed as JSON, or text for people.
#ifndef FERRY_TOOLS_FERRYCTL_OBSERVE_COMMANDS_H_
#define FERRY_TOOLS_FERRYCTL_OBSERVE_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/value/value.h"
#include "tools/ferryctl/session.h"

namespace ferry {
namespace ctl {

// `dump [--out=DIR] [WORKER…]`: every named worker's (default: every
// worker's) flight recorder into DIR/<worker>.json. DIR defaults to a new
// dump-<UTC time> in the job's directory when this user's `up` started
// the job, else to ferry-dump-<UTC time> here. Returns
//   {"dir":DIR,"files":[…],"failed":[{"worker","error"}]};
// UNAVAILABLE (with the first error) if no worker's dump was written.
absl::StatusOr<Value> DumpCommand(Session& session, std::string out,
                                  const std::vector<std::string>& workers);

// `status --format=prometheus`: every worker's metrics (rpc/metrics.h) in
// Prometheus' text format, merged (each sample labelled with its worker).
// A worker that does not answer is left out, with a comment line naming
// it; UNAVAILABLE if none answers.
absl::StatusOr<std::string> MetricsCommand(Session& session);

// `analyze DIR`: tools/ferryctl/analyze.h's report as JSON (`json`) or
// text.
absl::StatusOr<std::string> AnalyzeCommand(const std::string& dir, bool json);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_OBSERVE_COMMANDS_H_
