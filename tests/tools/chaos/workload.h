// A chaos soak's client: random operations through one ClientImpl until
// told to stop — calls (echo, add, sleep_ms) to any rank, RRefs (remote,
// fetch, release) owned by any rank, and all_reduce across the world —
// each counted in a Tally by kind and outcome, with the invariants checked:
// every operation ends by its deadline plus a margin, and every error names
// a worker ("worker<N>").
#ifndef FERRY_TESTS_TOOLS_CHAOS_WORKLOAD_H_
#define FERRY_TESTS_TOOLS_CHAOS_WORKLOAD_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "tests/tools/chaos/tally.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace chaos {

struct WorkloadOptions {
  absl::Duration op_timeout = absl::Seconds(5);  // Each operation's deadline.
  absl::Duration margin = absl::Seconds(3);      // Past it: a hang.
  uint64_t seed = 1;
};

// Runs until `stop` is set (then returns within one operation's bound).
void RunClient(ClientImpl& client, const WorkloadOptions& options,
               const std::atomic<bool>& stop, Tally& tally);

// Whether `message` names a worker: "worker" followed by a digit.
bool NamesAWorker(absl::string_view message);

}  // namespace chaos
}  // namespace ferry

#endif  // FERRY_TESTS_TOOLS_CHAOS_WORKLOAD_H_
