// ferryctl's commands for looking inside a running job (README "Observing
// a job"): flight recorder dumps and their analysis. Each returns the
// Value printed as JSON, or text for people.
#ifndef FERRY_TOOLS_FERRYCTL_OBSERVE_COMMANDS_H_
#define FERRY_TOOLS_FERRYCTL_OBSERVE_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/value/value.h"
#include "tools/ferryctl/session.h"

namespace ferry {
namespace ctl {

// `dump [--out=DIR] [WORKER…]`: every named worker's (default: every
// worker's) flight recorder into DIR/worker<rank>.json. DIR defaults to a new
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

// `stacks WORKER`: the worker's threads and their symbolized stacks, what
// each waits for, the calls executing and the collectives waiting there
// (the worker's ferry.stacks), and, for a Python worker, its Python
// threads' stacks ("python"; ferry.python_stacks).
absl::StatusOr<Value> StacksCommand(Session& session,
                                    const std::string& worker);
// StacksCommand's result for people.
std::string StacksText(const Value& stacks);

// `call --trace WORKER FUNC [ARGS]`: the call under a new sampled trace,
// then every worker's spans of it, as a tree:
//   {"result":R,"trace_id":T,"spans":[{"name","worker","span_id",
//    "parent_span_id"?,"start_unix_nano","duration_ns","status","peer"?,
//    "kind","children":[…]}]}
// (roots first, children by start). The call's failure is returned after
// the tree was printed to `tree_out` (as TraceText).
absl::StatusOr<Value> TracedCallCommand(Session& session,
                                        const std::string& worker,
                                        const std::string& fn,
                                        std::vector<Value> args,
                                        std::ostream& tree_out);
// The span tree for people: one line per span, indented by depth.
std::string TraceText(const Value& traced);

// `watch [WORKER] [--count=N] [--all]`: the job's membership events
// (rpc/membership/membership_events.h: deaths and departures with their cause,
// replacements, revocations) as WORKER sees them — by default the first
// worker that answers, worker0 first — one JSON line each on `out`:
//   {"seq","event","rank","worker","detail","time","group"?,"seen_by"}
// from now on (--all: the ones the worker kept first), until interrupted
// or `count` (> 0) lines were printed. When the watched worker stops
// answering, the next live one is watched, from its newest event on, after
// the events it kept about the one that stopped (its death, say): a note
// on `notes` says so. UNAVAILABLE once no worker answers.
absl::Status WatchCommand(Session& session, const std::string& worker,
                          int64_t count, bool all, std::ostream& out,
                          std::ostream& notes);

// `analyze DIR`: tools/ferryctl/analyze.h's report as JSON (`json`) or
// text.
absl::StatusOr<std::string> AnalyzeCommand(const std::string& dir, bool json);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_OBSERVE_COMMANDS_H_
