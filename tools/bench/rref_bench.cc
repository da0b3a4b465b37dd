#include "tools/bench/rref_bench.h"

#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "rpc/base/status_util.h"
#include "rref/rref.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace bench {

namespace {

constexpr absl::Duration kBound = absl::Seconds(60);

// remote(echo(x)) then to_here, sequentially; microseconds per pair.
absl::Status RemoteToHereLatency(LocalJob& job, int iterations,
                                 Report* report) {
  std::vector<double> samples;
  for (int i = 0; i < iterations + iterations / 10; ++i) {
    absl::Time start = absl::Now();
    FERRY_ASSIGN_OR_RETURN(
        RRef r, job.worker(0).rrefs().Remote("worker1", "echo", {i}));
    FERRY_RETURN_IF_ERROR(r.ToHere(kBound).status());
    if (i >= iterations / 10)
      samples.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  for (double p : {50.0, 99.0}) {
    std::vector<double> copy = samples;
    report->Add({"rref", p == 50 ? "latency_p50_us" : "latency_p99_us", "ferry",
                 "remote_to_here", 8, 2, 1, Percentile(copy, p)});
  }
  return absl::OkStatus();
}

// Windows of `batch` RRefs created (confirmed) then released; the owner
// table returns to empty before the clock stops. RRefs per second.
absl::StatusOr<double> CreateReleaseRate(LocalJob& job, int total, int batch,
                                         bool forked) {
  const absl::Time start = absl::Now();
  for (int done = 0; done < total; done += batch) {
    std::vector<RRef> refs;
    std::vector<Future<Value>> waits;
    for (int i = 0; i < batch; ++i) {
      FERRY_ASSIGN_OR_RETURN(
          RRef r, job.worker(0).rrefs().Remote("worker1", "echo", {i}));
      // user→user: worker2 receives a fork and fetches through it.
      waits.push_back(forked ? job.worker(0).rpc().RpcAsync(
                                   "worker2", "to_here", {r.AsValue()})
                             : r.ToHereAsync(kBound));
      refs.push_back(std::move(r));
    }
    for (auto& w : waits) FERRY_RETURN_IF_ERROR(w.Wait(kBound).status());
  }
  // Releases are asynchronous: count them in.
  absl::Time deadline = absl::Now() + kBound;
  while (job.worker(1).rrefs().owner_stats().owned > 0) {
    if (absl::Now() > deadline)
      return absl::DeadlineExceededError("releases pending");
    absl::SleepFor(absl::Microseconds(200));
  }
  return total / absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

absl::Status RunRRefSuite(bool quick, Report* report) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<LocalJob> job, LocalJob::Start(3));
  FERRY_RETURN_IF_ERROR(RemoteToHereLatency(*job, quick ? 200 : 2000, report));
  for (bool forked : {false, true}) {
    FERRY_ASSIGN_OR_RETURN(
        double rate, CreateReleaseRate(*job, quick ? 2000 : 20000, 64, forked));
    report->Add({"rref", "rrefs_per_s", "ferry",
                 forked ? "create_fork_release" : "create_release", 8,
                 forked ? 3 : 2, 64, rate});
  }
  return job->ShutdownAll();
}

}  // namespace bench
}  // namespace ferry
