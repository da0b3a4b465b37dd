#include "tools/runtime/local_job.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

WorkerConfig Defaults(int rank, int n, const LocalJob::Options& options) {
  WorkerConfig o;
  o.rank = rank;
  o.world_size = n;
  o.listen = "127.0.0.1:0";
  // In one process, failures are local and quick to see.
  o.heartbeat_timeout = absl::Seconds(2);
  if (options.configure) options.configure(o);
  o.rank = rank;
  o.world_size = n;
  return o;
}

absl::Status StartAll(std::vector<std::unique_ptr<WorkerImpl>>& workers) {
  std::vector<absl::Status> results(workers.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < workers.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = workers[r]->Start(); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalJob>> LocalJob::Start(int n,
                                                          Options options) {
  if (n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a job needs >= 1 worker, got ", n));
  }
  auto job = std::unique_ptr<LocalJob>(new LocalJob());
  job->workers_.push_back(
      std::make_unique<WorkerImpl>(Defaults(0, n, options)));
  if (options.setup) options.setup(*job->workers_[0]);
  absl::StatusOr<std::string> master = job->workers_[0]->Listen();
  if (!master.ok()) return master.status();
  job->master_ = *master;
  for (int rank = 1; rank < n; ++rank) {
    WorkerConfig o = Defaults(rank, n, options);
    o.master = job->master_;  // Known only now: rank 0 picked its port.
    job->workers_.push_back(std::make_unique<WorkerImpl>(o));
    if (options.setup) options.setup(*job->workers_.back());
  }
  absl::Status started = StartAll(job->workers_);
  if (!started.ok()) return started;
  return job;
}

LocalJob::~LocalJob() {
  for (auto& w : workers_) w->Stop();
}

absl::StatusOr<std::unique_ptr<ClientImpl>> LocalJob::Connect(
    RpcClientOptions options, ClientLayers layers) const {
  options.master = master_;
  return ClientImpl::Connect(std::move(options), layers);
}

absl::Status LocalJob::ShutdownAll() {
  std::vector<absl::Status> results(workers_.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < workers_.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = workers_[r]->Shutdown(); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ferry
