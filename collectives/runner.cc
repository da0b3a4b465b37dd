#include "collectives/runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/algorithms.h"
#include "collectives/collective_context.h"
#include "collectives/op.h"
#include "collectives/op_key.h"

namespace ferry {

absl::StatusOr<OpSpec> PrepareOp(ProcessGroup& group, absl::string_view name,
                                 const CollectiveOptions& options) {
  if (algorithms::Find(name) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown collective \"", name,
                     "\"; known: ", absl::StrJoin(algorithms::Names(), ", ")));
  }
  OpSpec spec;
  spec.name = std::string(name);
  if (options.tag.empty()) {
    const ProcessGroup::OpNumber op = group.NextOp();
    spec.label = SequencedOpLabel(op.sequence, op.epoch);
    spec.key = SequencedOpKey(group.name(), op.sequence, op.epoch);
  } else {
    absl::StatusOr<std::string> key = TaggedOpKey(group.name(), options.tag);
    if (!key.ok()) return key.status();
    spec.label = options.tag;
    spec.key = *std::move(key);
  }
  spec.timeout = options.timeout > absl::ZeroDuration()
                     ? options.timeout
                     : group.context().agent().default_timeout();
  // "No timeout" and absurd ones become a week: the deadline stays finite.
  if (spec.timeout <= absl::ZeroDuration() ||
      spec.timeout > absl::Hours(24 * 7)) {
    spec.timeout = absl::Hours(24 * 7);
  }
  return spec;
}

absl::StatusOr<Value> RunOp(ProcessGroup& group, const OpSpec& spec,
                            const Value& input, const Value& params) {
  if (group.context().stopping()) {
    return absl::UnavailableError(absl::StrCat(group.context().agent().name(),
                                               " is stopping: ", spec.name,
                                               " not run"));
  }
  Op op(group, spec.name, spec.key, spec.label, spec.timeout);
  absl::StatusOr<Value> out = algorithms::Find(spec.name)(op, input, params);
  // Returning OK means every message this rank sent was delivered.
  if (out.ok()) {
    absl::Status flushed = op.Flush();
    if (!flushed.ok()) out = flushed;
  }
  if (!out.ok()) return op.Fail(out.status());
  return out;
}

Future<Value> RunOpAsync(ProcessGroup& group, OpSpec spec, Value input,
                         Value params) {
  Promise<Value> result;
  CollectiveContext& context = group.context();
  const std::string name = spec.name;
  const std::string key = spec.key;
  // Its peers may start it (and send to it) while it waits for a thread
  // here: its messages must wait for it, not expire (mailbox.h).
  context.mailbox().Begin(key);
  // The task keeps the group alive: its caller may drop it meanwhile.
  bool queued = context.executor().Submit(
      [group = group.shared_from_this(), result, spec = std::move(spec),
       input = std::move(input), params = std::move(params)]() mutable {
        result.Set(RunOp(*group, spec, input, params));
      });
  if (!queued) {
    context.mailbox().Close(key);
    result.Set(absl::UnavailableError(absl::StrCat(
        context.agent().name(), " is stopping: ", name, " not run")));
  }
  return result.future();
}

}  // namespace ferry
