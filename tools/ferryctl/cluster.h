// `ferryctl up` and `ferryctl down`: a local cluster of detached ferryd
// daemons, started and stopped with bounded waits.
#ifndef FERRY_TOOLS_FERRYCTL_CLUSTER_H_
#define FERRY_TOOLS_FERRYCTL_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/value/value.h"
#include "tools/ferryctl/session.h"

namespace ferry {
namespace ctl {

struct UpOptions {
  int world_size = 1;
  int port = 29500;  // Rank 0's port; 0 picks one.
  // The private job directory (tools/runtime/job_dir.h); default a fresh
  // one.
  std::string dir;
  std::vector<std::string> ferryd_flags;  // Passed to every ferryd.
  // Whether ferryd_flags name a token already; else up makes one.
  bool has_token = false;
  absl::Duration timeout = absl::Seconds(60);
};

// Starts world_size ferryd daemons on 127.0.0.1 that outlive ferryctl, and
// waits until all joined: {"master","dir","workers":[{name,rank,address,pid}]}.
// On failure every daemon started is killed and the error of the daemon
// that failed (from its log) is returned.
absl::StatusOr<Value> Up(const UpOptions& options);

// Gracefully shuts down every worker of the session's job and waits until
// their processes are gone. Daemons this user's `up` spawned for the job
// (recorded in its directory and still those processes) that do not exit
// in time get SIGTERM, then SIGKILL; no other process is ever signalled:
// {"stopped":[{name, rank, pid, "how": graceful|terminated|killed|
// already_gone|still_running|remote}]}.
absl::StatusOr<Value> Down(Session& session);

// The ferryd binary: $FERRYD, next to this executable, or on $PATH.
absl::StatusOr<std::string> FindFerryd();

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_CLUSTER_H_
