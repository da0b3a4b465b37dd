// A job of N workers inside this process, on 127.0.0.1 with picked ports:
// `ferryctl --local=N`, in-process tests and benchmarks.
//
//   ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(3));
//   ASSERT_OK_AND_ASSIGN(auto client, job->Connect());
#ifndef FERRY_TOOLS_RUNTIME_LOCAL_JOB_H_
#define FERRY_TOOLS_RUNTIME_LOCAL_JOB_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/base/timers.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {

// How LocalJob::Start makes its workers (outside the class: a default
// member initializer must be complete where `Options options = {}` is).
struct LocalJobOptions {
  // Adjusts each worker's options (rank, world_size, master already set).
  std::function<void(WorkerConfig&)> configure;
  // Runs on each worker before it starts (register functions, …).
  std::function<void(WorkerImpl&)> setup;
  // Manual time: the timers, and so the clock, of every worker and of
  // clients from Connect(): deadlines, leases, sweeps and heartbeats move
  // only when the test steps them (a ManualTimers; not owned, outlives
  // the job). Heartbeats then time out after 1000 hours only (a step
  // of hours would declare everyone dead): a test that kills a worker
  // steps past its own heartbeat_timeout (set in `configure`).
  // The queue is shared: Stop() it before the job is destroyed, and never
  // step while a worker or client is being destroyed. A worker stopped
  // mid-test leaves its timers queued, so every timer set on a component
  // must be cancelled by its destructor or hold the component weakly, or a
  // later step runs freed code.
  // Null: real time.
  Timers* timers = nullptr;
};

class LocalJob {
 public:
  using Options = LocalJobOptions;

  // Starts all workers and returns once they joined.
  static absl::StatusOr<std::unique_ptr<LocalJob>> Start(int n,
                                                         Options options = {});
  // Stops any worker still running.
  ~LocalJob();

  WorkerImpl& worker(int rank) { return *workers_[rank]; }
  int size() const { return static_cast<int>(workers_.size()); }
  const std::string& master() const { return master_; }

  // A client of this job.
  absl::StatusOr<std::unique_ptr<ClientImpl>> Connect(
      RpcClientOptions options = {}, ClientLayers layers = {}) const;

  // Graceful shutdown of every worker at once; the first error, if any.
  absl::Status ShutdownAll();

  // Starts a new incarnation of worker `rank` with the job's options, as a
  // replacement; returns once it joined, with the old one destroyed (and
  // references to it invalid). The old incarnation must be stopped and
  // declared gone first: a live holder's rank is ALREADY_EXISTS (the old
  // one is kept then).
  absl::Status Replace(int rank);

 private:
  LocalJob() = default;
  WorkerConfig ConfigFor(int rank) const;

  Options options_;
  std::vector<std::unique_ptr<WorkerImpl>> workers_;
  std::string master_;
};

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_LOCAL_JOB_H_
