// What a worker's collectives use of the worker they run in, and nothing
// more: who this worker is and who the others are, its clock and timers,
// where work runs off the calling thread, its limits, metrics and tracer,
// control-plane calls to a peer (votes, revokes, probes), the job's store,
// the functions peers call here, and the transport of collective messages.
//
// The worker's own host (collectives/host/agent_host.h) is the one place
// that reaches into an RpcAgent for these. Tests give a fake one
// (tests/collectives/testing/) whose transport and calls are stepped by
// hand, so a collective protocol runs deterministically in one process.
#ifndef FERRY_COLLECTIVES_OP_COLLECTIVE_HOST_H_
#define FERRY_COLLECTIVES_OP_COLLECTIVE_HOST_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/transport/config.h"
#include "collectives/transport/mailbox.h"
#include "collectives/transport/transport.h"
#include "rpc/base/executor.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/base/timers.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership_event.h"
#include "rpc/membership/store_client.h"
#include "rpc/metrics.h"
#include "rpc/registry.h"
#include "rpc/tracing.h"
#include "rpc/value/value.h"

namespace ferry {

class CollectiveHost {
 public:
  virtual ~CollectiveHost() = default;

  // ---- Who ----
  virtual const std::string& name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Every rank's worker (filled once the worker started).
  virtual const Directory& directory() const = 0;
  // Why global rank `rank`'s worker is down (died or left), if it is.
  virtual std::optional<absl::Status> DownReason(int rank) const = 0;

  // ---- Time and threads ----
  // Every deadline of the collectives is on timers().clock().
  virtual Timers& timers() = 0;
  // Runs `task` off the calling thread; UNAVAILABLE once stopping (the task
  // is dropped).
  virtual absl::Status Submit(Executor::Task task) = 0;

  // ---- Configuration and telemetry ----
  virtual const Limits& limits() const = 0;
  // An op's timeout when its options give none (0: none).
  virtual absl::Duration default_timeout() const = 0;
  virtual Metrics* metrics() = 0;  // Null: none.
  virtual bool tracing() const = 0;
  virtual Tracer* tracer() = 0;  // Null: none.
  // One entry of the worker's membership events ("revoked", …).
  virtual void Record(MembershipEvent event) = 0;

  // ---- Peers and the job ----
  // Calls function `function` on global rank `rank` (the control plane).
  // `timeout`: unset, the worker's default.
  virtual Future<Value> Call(int rank, const std::string& function,
                             std::vector<Value> args,
                             std::optional<absl::Duration> timeout) = 0;
  // Where functions peers call here are registered.
  virtual Registry& registry() = 0;
  // The job's store (membership_backend.h's OpenStore).
  virtual absl::StatusOr<std::unique_ptr<KeyValueStore>> OpenStore() = 0;
  // The transport delivering peers' messages into `mailbox`; called once.
  virtual std::unique_ptr<CollectiveTransport> OpenTransport(
      Mailbox* mailbox, const CollectiveConfig& config) = 0;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_COLLECTIVE_HOST_H_
