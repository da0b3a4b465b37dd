// Running a collective op on one rank: naming it, starting its algorithm
// (on the caller's thread, until it waits for a message: from then on it
// is driven by completions, op.h), and handing over its result.
//
// Ops are identified across ranks by (group, sequence) when called
// SPMD-style — every member calls the same collectives on the group in the
// same order — or by (group, tag) when the caller names them (clients do).
// The identity is fixed when the op is prepared, so async ops started in
// the same order on every rank match even if they run out of order.
#ifndef FERRY_COLLECTIVES_OP_RUNNER_H_
#define FERRY_COLLECTIVES_OP_RUNNER_H_

#include <optional>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectives/op/collective_context.h"
#include "collectives/op/group_state.h"
#include "collectives/op/op.h"
#include "collectives/op/options.h"
#include "collectives/op/process_group.h"
#include "collectives/op/work.h"
#include "rpc/base/future.h"
#include "rpc/stacks.h"

namespace ferry {

// Names op `name` on `group` (op_key.h). INVALID_ARGUMENT for a tag over
// kMaxOpTagBytes (no sequence number is used then).
absl::StatusOr<OpSpec> PrepareOp(ProcessGroup& group, absl::string_view name,
                                 const CollectiveOptions& options);

// Begins the op here and runs `algorithm` with its Result; the future is
// its result once the op ended (on failure, the same status on every
// member). UNAVAILABLE at once if the worker is stopping; ABORTED if the
// group was revoked (elastic.h).
template <typename T>
Future<T> StartOp(ProcessGroup& group, const OpSpec& spec,
                  absl::AnyInvocable<void(Result<T>) &&> algorithm) {
  if (group.state().context().stopping()) {
    return Future<T>::Ready(absl::UnavailableError(
        absl::StrCat(group.state().context().host().name(),
                     " is stopping: ", spec.name, " not run")));
  }
  Promise<T> result;
  // Written by the algorithm before it succeeds, read once the op ended.
  auto slot = std::make_shared<std::optional<T>>();
  std::shared_ptr<Op> op =
      Op::Begin(group, spec, [result, slot](absl::Status status) {
        if (status.ok()) {
          result.Set(std::move(**slot));
        } else {
          result.Set(std::move(status));
        }
      });
  // An op of a revoked group fails here and sends nothing (a member still
  // waiting in an earlier op must not be answered by it), even where no
  // message would tell it (a group of one).
  if (std::optional<absl::Status> revoked =
          group.state().context().RevokedFor(spec.key)) {
    op->Fail(*std::move(revoked));
    return result.future();
  }
  // A pinned group (Shrink's) whose member was replaced: its newcomer
  // takes no part, so nobody would come.
  if (std::optional<int> replaced = group.state().pinned()
                                        ? group.state().ReplacedMember()
                                        : std::nullopt) {
    op->Fail(absl::UnavailableError(absl::StrCat(
        spec.name, " op ", spec.label, ": rank ", *replaced, " (worker",
        group.members()[*replaced], ") of group ", group.name(),
        " was replaced since the group was made: shrink it, or grow")));
    return result.future();
  }
  std::move(algorithm)(
      Result<T>(std::move(op), [slot](T value) { *slot = std::move(value); }));
  return result.future();
}

template <typename T>
using Algorithm = absl::AnyInvocable<void(Result<T>) &&>;

// Prepares op `name` and starts `algorithm` on it. `inputs` describe this
// rank's input for the flight recorder (flight_recorder.h's Summarize).
template <typename T>
Future<T> RunOpAsync(ProcessGroup& group, absl::string_view name,
                     const CollectiveOptions& options, Algorithm<T> algorithm,
                     std::vector<TensorSummary> inputs = {}) {
  absl::StatusOr<OpSpec> spec = PrepareOp(group, name, options);
  if (!spec.ok()) return Future<T>::Ready(spec.status());
  spec->inputs = std::move(inputs);
  return StartOp<T>(group, *spec, std::move(algorithm));
}

// What a thread waiting for op `spec` says it waits for (rpc/stacks.h).
inline std::string WaitingFor(const OpSpec& spec) {
  return absl::StrCat(spec.name, " op ", spec.key,
                      " (whom it waits for: the collectives waiting here)");
}

// RunOpAsync as a Work that names its op (Work::what, WaitingFor).
template <typename T>
Work<T> StartWork(ProcessGroup& group, absl::string_view name,
                  const CollectiveOptions& options, Algorithm<T> algorithm,
                  std::vector<TensorSummary> inputs = {}) {
  absl::StatusOr<OpSpec> spec = PrepareOp(group, name, options);
  if (!spec.ok()) return Work<T>(Future<T>::Ready(spec.status()));
  spec->inputs = std::move(inputs);
  std::string what = WaitingFor(*spec);
  return Work<T>(StartOp<T>(group, *spec, std::move(algorithm)),
                 std::move(what));
}

// The same, waiting on the caller's thread. The op ends by its deadline
// (plus the moment it takes to ask who joined); the wait's bound, in real
// time, is only a backstop.
template <typename T>
absl::StatusOr<T> RunOp(ProcessGroup& group, absl::string_view name,
                        const CollectiveOptions& options,
                        Algorithm<T> algorithm,
                        std::vector<TensorSummary> inputs = {}) {
  absl::StatusOr<OpSpec> spec = PrepareOp(group, name, options);
  if (!spec.ok()) return spec.status();
  spec->inputs = std::move(inputs);
  Future<T> result = StartOp<T>(group, *spec, std::move(algorithm));
  WaitNote note(WaitingFor(*spec));
  return result.Wait(spec->timeout + absl::Seconds(10));
}

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_RUNNER_H_
