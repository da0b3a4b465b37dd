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
  if (options.timers != nullptr) {
    o.timers = options.timers;
    o.heartbeat_timeout = absl::Hours(1000);
  }
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
  job->options_ = std::move(options);
  job->workers_.resize(n);
  job->workers_[0] = std::make_unique<WorkerImpl>(job->ConfigFor(0));
  if (job->options_.setup) job->options_.setup(*job->workers_[0]);
  absl::StatusOr<std::string> master = job->workers_[0]->Listen();
  if (!master.ok()) return master.status();
  job->master_ = *master;  // Known only now: rank 0 picked its port.
  for (int rank = 1; rank < n; ++rank) {
    job->workers_[rank] = std::make_unique<WorkerImpl>(job->ConfigFor(rank));
    if (job->options_.setup) job->options_.setup(*job->workers_[rank]);
  }
  absl::Status started = StartAll(job->workers_);
  if (!started.ok()) return started;
  return job;
}

WorkerConfig LocalJob::ConfigFor(int rank) const {
  WorkerConfig o = Defaults(rank, static_cast<int>(workers_.size()), options_);
  if (rank != 0) o.master = master_;
  return o;
}

absl::Status LocalJob::Replace(int rank) {
  if (rank < 0 || rank >= size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no rank ", rank, " in a job of ", size()));
  }
  auto worker = std::make_unique<WorkerImpl>(ConfigFor(rank));
  if (options_.setup) options_.setup(*worker);
  absl::Status started = worker->Start();
  if (!started.ok()) return started;
  workers_[rank].swap(worker);
  return absl::OkStatus();  // The old one is destroyed here.
}

LocalJob::~LocalJob() {
  for (auto& w : workers_) w->Stop();
}

absl::StatusOr<std::unique_ptr<ClientImpl>> LocalJob::Connect(
    RpcClientOptions options, ClientLayers layers) const {
  options.master = master_;
  if (options.timers == nullptr) options.timers = options_.timers;
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
