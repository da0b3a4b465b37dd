// Running a collective op on one rank: naming it, running its algorithm
// (on the caller's thread, or on the collectives executor), and making its
// failure everyone's.
//
// Ops are identified across ranks by (group, sequence) when called
// SPMD-style — every member calls the same collectives on the group in the
// same order — or by (group, tag) when the caller names them (clients do).
// The identity is fixed when the op is prepared, so async ops started in
// the same order on every rank match even if they run out of order.
#ifndef FERRY_COLLECTIVES_RUNNER_H_
#define FERRY_COLLECTIVES_RUNNER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectives/process_group.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"

namespace ferry {

struct CollectiveOptions {
  // The op's deadline, from its start on this rank; zero: the worker's
  // default call timeout.
  absl::Duration timeout = absl::ZeroDuration();
  // Names the op instead of the group's sequence number. Every member
  // passes the same tag; tags are unique among the group's ops.
  std::string tag;
};

struct OpSpec {
  std::string name;   // "all_reduce"
  std::string key;    // "world/17", "g0,2#0/t:<tag>"
  std::string label;  // "17", or the tag
  absl::Duration timeout;
};

// Names op `name` on `group` (op_key.h). INVALID_ARGUMENT for an unknown
// collective or a tag over kMaxOpTagBytes (no sequence number is used then).
absl::StatusOr<OpSpec> PrepareOp(ProcessGroup& group, absl::string_view name,
                                 const CollectiveOptions& options);

// Runs the op here; on failure it is aborted on every member, and every
// member returns the same status.
absl::StatusOr<Value> RunOp(ProcessGroup& group, const OpSpec& spec,
                            const Value& input, const Value& params);

// RunOp on the collectives executor; the op keeps `group` alive.
Future<Value> RunOpAsync(ProcessGroup& group, OpSpec spec, Value input,
                         Value params);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_RUNNER_H_
