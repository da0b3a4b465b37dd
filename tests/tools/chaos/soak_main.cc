// chaos_soak: a randomized soak of real ferryd workers on hosts in network
// namespaces (tests/testing/netns.h) while faults land. Run by
// `tools/dev chaos [MINUTES]` (root; iproute2).
//
// A job is N workers, one per host; this process is the driver, on a host of
// its own, with a few clients doing calls, RRef cycles and all_reduce in a
// loop (workload.h), plus a client process on another host holding RRefs.
// One fault at a time lands at random: kill -9 of any rank (rank 0's ends
// the job by design), a partition or a pause shorter or longer than the
// heartbeat timeout, kill -9 of the RRef-holding client. A job ends when
// its master is gone, when fewer than two workers are left, or after
// --job_seconds; then the invariants are checked and a new job starts.
//
// Invariants (each violation counted, with examples): every operation ends
// by its deadline plus a margin, and every error names a worker; at the end
// of a job whose master lives, the live workers' owner tables return to
// zero; when the master dies, the survivors exit by themselves (issue 13's
// "no headless job"); no process is left in the network after a job; no
// sanitizer report in any worker's log. Exit status: 0 if none was
// violated, 1 otherwise, 2 if the soak could not run.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "rpc/auth/security.h"
#include "tests/testing/await.h"
#include "tests/testing/net_job.h"
#include "tests/testing/netns.h"
#include "tests/tools/chaos/tally.h"
#include "tests/tools/chaos/workload.h"
#include "tools/runtime/worker_impl.h"

ABSL_FLAG(double, minutes, 1.0, "how long to run");
ABSL_FLAG(int, workers, 5, "workers per job (one host each)");
ABSL_FLAG(int, clients, 3, "clients in this process doing operations");
ABSL_FLAG(uint64_t, seed, 0, "random seed (0: from the clock; printed)");
ABSL_FLAG(std::string, ferryd, "", "path of ferryd");
ABSL_FLAG(std::string, ferryctl, "", "path of ferryctl");
ABSL_FLAG(std::string, dir, "", "logs (default: a fresh /tmp/ferry-chaos.*)");
ABSL_FLAG(std::string, json, "", "also write the JSON summary here");
ABSL_FLAG(int64_t, heartbeat_timeout_ms, 2000,
          "the workers' heartbeat timeout");
ABSL_FLAG(int64_t, rref_lease_ms, 3000, "the workers' and clients' RRef lease");
ABSL_FLAG(int64_t, op_timeout_ms, 5000, "each operation's deadline");
ABSL_FLAG(int64_t, job_seconds, 45, "a job ends after this long at the most");

namespace ferry {
namespace chaos {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::KillProcess;
using ::ferry::testing::NetJob;
using ::ferry::testing::PauseProcess;
using ::ferry::testing::ResumeProcess;
using ::ferry::testing::TestNetwork;

// How long survivors get to exit after their master died: the master
// timeout (5 s today), the heartbeat timeout, and slack.
constexpr absl::Duration kHeadlessBound = absl::Seconds(15);
constexpr absl::Duration kExitBound = absl::Seconds(10);

class Soak {
 public:
  Soak(TestNetwork& net, std::string dir, uint64_t seed)
      : net_(net), dir_(std::move(dir)), rng_(seed), seed_(seed) {
    heartbeat_ = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
    lease_ = absl::Milliseconds(absl::GetFlag(FLAGS_rref_lease_ms));
  }

  void Run(absl::Duration length) {
    start_ = absl::Now();
    end_ = start_ + length;
    for (int n = 0; absl::Now() < end_; ++n) RunJob(n);
  }

  const Tally& tally() const { return tally_; }
  absl::Duration ran() const { return absl::Now() - start_; }

 private:
  // One job from start to its checks.
  void RunJob(int n) {
    job_dir_ = absl::StrCat(dir_, "/job", n);
    absl::StatusOr<std::unique_ptr<NetJob>> job = StartJob();
    if (!job.ok()) {
      tally_.Add("jobs", "start_failed");
      tally_.Example("job_start_failed", job.status().ToString());
      absl::SleepFor(absl::Seconds(1));
      return;
    }
    job_ = std::move(*job);
    tally_.Add("jobs", "started");
    StartClients();
    StartHolder();
    const absl::Time job_end = std::min(
        end_, absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_job_seconds)));
    while (absl::Now() < job_end && !JobOver()) {
      absl::SleepFor(absl::Milliseconds(500 + Pick(1500)));
      if (holder_ == nullptr || holder_->Exited()) StartHolder();
      InjectFault();
    }
    StopClients();
    EndJob();
  }

  absl::StatusOr<std::unique_ptr<NetJob>> StartJob() {
    std::vector<std::string> hosts;
    for (int r = 0; r < absl::GetFlag(FLAGS_workers); ++r)
      hosts.push_back(absl::StrCat("w", r));
    return NetJob::Start(
        net_, {.ferryd = absl::GetFlag(FLAGS_ferryd),
               .hosts = hosts,
               .flags = {absl::StrCat("--heartbeat_timeout_ms=",
                                      absl::ToInt64Milliseconds(heartbeat_)),
                         absl::StrCat("--rref_lease_ms=",
                                      absl::ToInt64Milliseconds(lease_)),
                         "--shutdown_timeout_ms=3000"},
               .dir = job_dir_,
               .startup_timeout = absl::Seconds(30)});
  }

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  // ---- clients ----

  void StartClients() {
    stop_ = false;
    for (int i = 0; i < absl::GetFlag(FLAGS_clients); ++i) {
      RpcClientOptions o;
      o.master = job_->master();
      o.description = absl::StrCat("chaos-client", i);
      o.security = *Security::Load({.insecure = true});
      o.connect_timeout = absl::Seconds(10);
      ClientLayers layers;
      layers.rref.lease = lease_;
      absl::StatusOr<std::unique_ptr<ClientImpl>> c =
          ClientImpl::Connect(o, layers);
      if (!c.ok()) {
        tally_.Add("jobs", "client_connect_failed");
        tally_.Example("client_connect_failed", c.status().ToString());
        continue;
      }
      clients_.push_back(*std::move(c));
    }
    for (size_t i = 0; i < clients_.size(); ++i) {
      WorkloadOptions w;
      w.op_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_op_timeout_ms));
      w.seed = seed_ * 1000003 + next_client_seed_++;
      threads_.emplace_back(
          [this, i, w] { RunClient(*clients_[i], w, stop_, tally_); });
    }
  }

  void StopClients() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  // A ferryctl process on host "holder" that keeps RRefs on every rank
  // but 0 until it is killed (a client death the owners must survive).
  void StartHolder() {
    const std::string script = absl::StrCat(job_dir_, "/holder.ferry");
    {
      std::ofstream out(script);
      for (int i = 0; i < 12; ++i) {
        out << "R" << i << " = remote worker"
            << 1 + i % (job_->world_size() - 1) << " echo [" << i << "]\n";
      }
      out << "sleep 600000\n";
    }
    ::ferry::testing::ProcessOptions o;
    o.output_file = absl::StrCat(job_dir_, "/holder.log");
    auto p = net_.Start("holder",
                        {absl::GetFlag(FLAGS_ferryctl), "--insecure",
                         absl::StrCat("--master=", job_->master()),
                         "--timeout_ms=5000", "run", script},
                        o);
    holder_ = p.ok() ? *std::move(p) : nullptr;
  }

  // ---- faults ----

  std::vector<int> LiveRanks(bool with_zero) {
    std::vector<int> live;
    for (int r = with_zero ? 0 : 1; r < job_->world_size(); ++r)
      if (!job_->Exited(r)) live.push_back(r);
    return live;
  }

  void InjectFault() {
    std::vector<int> any = LiveRanks(true);
    if (any.empty()) return;
    const int rank = any[Pick(static_cast<int>(any.size()))];
    const bool long_fault = Pick(2) == 1;
    const absl::Duration length = long_fault ? heartbeat_ * 2 : heartbeat_ / 3;
    switch (Pick(8)) {
      case 0:
      case 1:
        return Kill(rank);
      case 2:
      case 3:
      case 4:
        return Partition(rank, length, long_fault);
      case 5:
      case 6:
        return Pause(rank, length, long_fault);
      default:
        return KillHolder();
    }
  }

  void Kill(int rank) {
    tally_.Add("faults", rank == 0 ? "kill9_rank0" : "kill9_worker");
    KillProcess(job_->pid(rank)).IgnoreError();
  }

  void Partition(int rank, absl::Duration length, bool long_fault) {
    const std::string host = job_->host(rank);
    tally_.Add("faults", long_fault ? "partition_long" : "partition_short");
    if (!net_.Partition(host).ok()) tally_.Add("faults", "partition_failed");
    absl::SleepFor(length);  // The fault's length.
    if (!net_.Heal(host).ok()) tally_.Add("faults", "heal_failed");
  }

  void Pause(int rank, absl::Duration length, bool long_fault) {
    tally_.Add("faults", long_fault ? "pause_long" : "pause_short");
    PauseProcess(job_->pid(rank)).IgnoreError();
    absl::SleepFor(length);  // The fault's length.
    ResumeProcess(job_->pid(rank)).IgnoreError();
  }

  void KillHolder() {
    if (holder_ == nullptr || holder_->Exited()) return;
    tally_.Add("faults", "kill9_client");
    KillProcess(holder_->pid()).IgnoreError();
    holder_->Wait(kExitBound);
  }

  bool JobOver() { return job_->Exited(0) || LiveRanks(true).size() < 2; }

  // ---- the checks at a job's end ----

  void EndJob() {
    if (job_->Exited(0)) {
      tally_.Add("jobs", "ended_by_master_death");
      CheckSurvivorsExit();
    } else {
      tally_.Add("jobs", JobOver() ? "ended_by_deaths" : "ended_by_time");
      if (holder_ != nullptr) KillHolder();
      CheckOwnerTablesEmpty();
    }
    for (auto& c : clients_) c->Close(/*leave=*/false);
    clients_.clear();
    holder_.reset();
    job_->KillAll();
    CheckNothingLeft();
    CountSanitizerReports();
    job_.reset();
  }

  // Issue 13: survivors of the master notice within the heartbeat timeout
  // and exit by themselves.
  void CheckSurvivorsExit() {
    const absl::Time deadline = absl::Now() + kHeadlessBound;
    for (int r = 1; r < job_->world_size(); ++r) {
      AwaitTrue([&] { return job_->Exited(r); }, deadline - absl::Now(),
                absl::Milliseconds(50));
      if (!job_->Exited(r)) {
        tally_.Add("violations", "headless_survivor");
        tally_.Example("headless_survivor",
                       absl::StrCat("worker", r, " still runs ",
                                    absl::FormatDuration(kHeadlessBound),
                                    " after its master died (", job_dir_, ")"));
      }
    }
  }

  // The live workers' owner tables return to zero once clients released
  // everything and the killed holder's lease ran out.
  void CheckOwnerTablesEmpty() {
    if (clients_.empty()) return;
    RpcClient& rpc = clients_[0]->rpc();
    const absl::Time deadline =
        absl::Now() + lease_ + 2 * heartbeat_ + absl::Seconds(10);
    for (int r : LiveRanks(true)) {
      const std::string name = absl::StrCat("worker", r);
      int64_t owned = -1;
      AwaitTrue(
          [&] {
            absl::StatusOr<proto::WorkerStatus> s =
                rpc.GetStatus(name, absl::Seconds(5));
            owned = s.ok() ? s->owned_rrefs() : -1;
            return owned == 0 || job_->Exited(r);
          },
          deadline - absl::Now(), absl::Milliseconds(200));
      if (owned > 0) {
        tally_.Add("violations", "leaked_rrefs");
        tally_.Example("leaked_rrefs",
                       absl::StrCat(name, " still owns ", owned,
                                    " RRefs at the end of ", job_dir_));
      }
      tally_.Add("checks", "owner_tables_checked");
    }
  }

  void CheckNothingLeft() {
    std::vector<pid_t> left;
    AwaitTrue(
        [&] {
          left = net_.Processes();
          return left.empty();
        },
        kExitBound, absl::Milliseconds(50));
    for (pid_t pid : left) {
      tally_.Add("violations", "process_left");
      tally_.Example("process_left",
                     absl::StrCat("pid ", pid, " after ", job_dir_));
      KillProcess(pid).IgnoreError();
    }
  }

  void CountSanitizerReports() {
    for (int r = 0; r < job_->world_size(); ++r) {
      for (absl::string_view line : absl::StrSplit(job_->log(r), '\n')) {
        if (absl::StrContains(line, "ERROR: AddressSanitizer") ||
            absl::StrContains(line, "ERROR: LeakSanitizer") ||
            absl::StrContains(line, "runtime error:") ||
            absl::StrContains(line, "WARNING: ThreadSanitizer")) {
          tally_.Add("violations", "sanitizer_report");
          tally_.Example("sanitizer_report",
                         absl::StrCat(job_->log_path(r), ": ", line));
        }
      }
    }
  }

  TestNetwork& net_;
  const std::string dir_;
  std::mt19937_64 rng_;
  const uint64_t seed_;
  absl::Duration heartbeat_, lease_;
  absl::Time start_, end_;
  Tally tally_;
  std::string job_dir_;
  std::unique_ptr<NetJob> job_;
  std::vector<std::unique_ptr<ClientImpl>> clients_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  uint64_t next_client_seed_ = 0;
  std::unique_ptr<::ferry::testing::BackgroundProcess> holder_;
};

std::string MakeDir() {
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (!dir.empty()) {
    mkdir(dir.c_str(), 0755);
    return dir;
  }
  char tmpl[] = "/tmp/ferry-chaos.XXXXXX";
  return mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
}

int Main() {
  if (absl::Status s = TestNetwork::Available(); !s.ok()) {
    std::cerr << "chaos_soak: " << s << "\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_ferryd).empty() ||
      absl::GetFlag(FLAGS_ferryctl).empty() ||
      absl::GetFlag(FLAGS_workers) < 2) {
    std::cerr
        << "chaos_soak: --ferryd, --ferryctl and --workers >= 2 are required\n";
    return 2;
  }
  std::vector<std::string> hosts = {"driver", "holder"};
  for (int r = 0; r < absl::GetFlag(FLAGS_workers); ++r)
    hosts.push_back(absl::StrCat("w", r));
  absl::StatusOr<std::unique_ptr<TestNetwork>> net = TestNetwork::Create(hosts);
  if (!net.ok()) {
    std::cerr << "chaos_soak: " << net.status() << "\n";
    return 2;
  }
  // Before any gRPC thread exists: every one this process starts is there.
  if (absl::Status s = (*net)->Enter("driver"); !s.ok()) {
    std::cerr << "chaos_soak: " << s << "\n";
    return 2;
  }
  // Every job's clients are destroyed before the next job's are made.
  uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed == 0) seed = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  const std::string dir = MakeDir();
  std::cerr << "chaos_soak: seed " << seed << ", logs in " << dir
            << ", network " << (*net)->subnet() << "\n";
  Soak soak(**net, dir, seed);
  soak.Run(absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60));
  const std::string json = soak.tally().Json(soak.ran());
  std::cout << soak.tally().Text(soak.ran()) << json << "\n";
  if (!absl::GetFlag(FLAGS_json).empty())
    std::ofstream(absl::GetFlag(FLAGS_json)) << json << "\n";
  (*net)->Destroy();
  return soak.tally().Violations() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace chaos
}  // namespace ferry

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int status = ferry::chaos::Main();
  // Exit without running gRPC's static destructors under live threads.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}
