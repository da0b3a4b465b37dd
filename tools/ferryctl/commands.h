// ferryctl's commands that talk to a running job. Each returns the Value
// printed as JSON (docs/DESIGN.md "ferryctl contract").
#ifndef FERRY_TOOLS_FERRYCTL_COMMANDS_H_
#define FERRY_TOOLS_FERRYCTL_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "rpc/value/value.h"
#include "tools/ferryctl/session.h"

namespace ferry {
namespace ctl {

// The result of `fn(args…)` on `worker` (a name or a rank).
absl::StatusOr<Value> CallCommand(Session& session, const std::string& worker,
                                  const std::string& fn,
                                  std::vector<Value> args);

// {"workers":[{name, rank, address, owned_rrefs, user_rrefs, inflight, …}]};
// an unreachable worker is listed with "state":"unreachable" and "error".
absl::StatusOr<Value> StatusCommand(Session& session);

// StatusCommand's result as an aligned table, one worker per line.
std::string StatusTable(const Value& status);

// {"worker": W, "functions":[{name, signature, doc}]}.
absl::StatusOr<Value> FunctionsCommand(Session& session,
                                       const std::string& worker);

// remote(): creates an RRef on `worker` from fn(args…) held by this
// client. The RRef itself (as a Value).
absl::StatusOr<Value> RemoteRRef(Session& session, const std::string& worker,
                                 const std::string& fn,
                                 std::vector<Value> args);

// The one-shot `remote` command: create, wait for the owner's
// confirmation, fetch, release: {"rref":…,"owner":…,"value":…}.
absl::StatusOr<Value> RemoteCommand(Session& session, const std::string& worker,
                                    const std::string& fn,
                                    std::vector<Value> args);

// to_here of an RRef this client holds.
absl::StatusOr<Value> FetchCommand(Session& session, const Value& rref);

// Owner tables: {"workers":[{"worker":W,"rrefs":[{id, creator, state,
// age_ms, forks:[{fork, holder, holder_name, confirmed}]}]}]} for `worker`
// or, if empty, every worker.
absl::StatusOr<Value> RRefsCommand(Session& session, const std::string& worker);

// Collective `op` across the job: `request` is {"ranks":[one input per
// rank, null = not taking part], "timeout_ms"?, params…} (docs/DESIGN.md);
// returns {"ranks":[one output per rank]}. Without "timeout_ms" the
// session's timeout bounds the op.
absl::StatusOr<Value> CollectiveCommand(Session& session, const std::string& op,
                                        Value request);

// A message's fields as a map (snake_case names; repeated fields as lists).
Value MessageToValue(const google::protobuf::Message& message);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_COMMANDS_H_
