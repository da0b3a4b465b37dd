#include "collectives/op/runner.h"

#include <string>
#include <utility>

#include "collectives/op/group_state.h"
#include "collectives/transport/op_key.h"

namespace ferry {

absl::StatusOr<OpSpec> PrepareOp(ProcessGroup& group, absl::string_view name,
                                 const CollectiveOptions& options) {
  OpSpec spec;
  spec.name = std::string(name);
  if (options.tag.empty()) {
    const collectives_internal::GroupState::OpNumber op =
        group.state().NextOp();
    spec.label = SequencedOpLabel(op.sequence, op.epoch);
    spec.key = SequencedOpKey(group.name(), op.sequence, op.epoch);
    spec.sequence = static_cast<int64_t>(op.sequence);
  } else {
    absl::StatusOr<std::string> key = TaggedOpKey(group.name(), options.tag);
    if (!key.ok()) return key.status();
    spec.label = options.tag;
    spec.key = *std::move(key);
  }
  spec.timeout = options.timeout > absl::ZeroDuration()
                     ? options.timeout
                     : group.state().context().host().default_timeout();
  // "No timeout" and absurd ones become a week: the deadline stays finite.
  if (spec.timeout <= absl::ZeroDuration() ||
      spec.timeout > absl::Hours(24 * 7)) {
    spec.timeout = absl::Hours(24 * 7);
  }
  return spec;
}

}  // namespace ferry
