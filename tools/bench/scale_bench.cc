#include "tools/bench/scale_bench.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collectives/client/client_collective.h"
#include "rpc/auth/security.h"
#include "rpc/base/status_util.h"
#include "rpc/client.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor.h"
#include "tools/bench/samples.h"

namespace ferry {
namespace bench {

namespace {

// Bounds on one op (a hang fails the suite instead of stalling it).
constexpr int64_t kOpTimeoutMs = 120000;

// The ferryctl beside this binary (bazel-bin/tools/ holds both).
std::string SiblingFerryctl() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "ferryctl";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "ferryctl";
}

// Runs `argv` (no shell), returns its stdout; UNAVAILABLE with the exit
// status if it failed.
absl::StatusOr<std::string> Run(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof(buffer))) > 0;)
    text.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(
        absl::StrJoin(argv, " "), " failed (status ", status, "): ", text));
  }
  return text;
}

// One job of `world` daemons, up until destroyed (down, then SIGKILL of
// any daemon left, so the suite never leaves a process behind).
class Job {
 public:
  static absl::StatusOr<std::unique_ptr<Job>> Up(const std::string& ferryctl,
                                                 int world,
                                                 absl::Duration* took) {
    auto job = std::unique_ptr<Job>(new Job(ferryctl));
    char dir[] = "/tmp/ferry_bench_scale.XXXXXX";
    if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp failed");
    job->dir_ = dir;
    const absl::Time start = absl::Now();
    FERRY_ASSIGN_OR_RETURN(
        std::string out,
        Run({ferryctl, "up", absl::StrCat("--world_size=", world), "--port=0",
             absl::StrCat("--dir=", job->dir_)}));
    *took = absl::Now() - start;
    FERRY_ASSIGN_OR_RETURN(Value up, ParseJson(out));
    job->master_ = up.Find("master")->as_string();
    for (const Value& w : up.Find("workers")->as_list())
      job->pids_.push_back(static_cast<pid_t>(w.Find("pid")->as_int()));
    RpcClientOptions o;
    o.master = job->master_;
    o.description = "ferry_bench scale";
    o.default_timeout = absl::Milliseconds(kOpTimeoutMs);
    FERRY_ASSIGN_OR_RETURN(
        o.security, Security::Load({.token_file = job->dir_ + "/token"}));
    FERRY_ASSIGN_OR_RETURN(job->client_, RpcClient::Connect(o));
    return job;
  }

  ~Job() {
    if (client_ != nullptr) client_->Close();
    if (!downed_) Down().IgnoreError();
    for (pid_t pid : pids_) kill(pid, SIGKILL);  // Gone already, normally.
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  RpcClient& client() { return *client_; }

  absl::Status Down() {
    downed_ = true;
    if (client_ != nullptr) client_->Close();
    return Run({ferryctl_, absl::StrCat("--master=", master_), "down"})
        .status();
  }

 private:
  explicit Job(std::string ferryctl) : ferryctl_(std::move(ferryctl)) {}

  const std::string ferryctl_;
  std::string dir_;
  std::string master_;
  std::vector<pid_t> pids_;
  std::unique_ptr<RpcClient> client_;
  bool downed_ = false;
};

Value OneFloat(float x) { return Value(Tensor::FromVector<float>({x})); }

// `ferryctl collective` requests: one float32 per rank (all_reduce) or
// per pair (all_to_all).
Value AllReduceRequest(int world) {
  Value::List ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(OneFloat(r));
  return Value(Value::Map{{"ranks", Value(std::move(ranks))},
                          {"op", Value(std::string("sum"))},
                          {"timeout_ms", Value(kOpTimeoutMs)}});
}

Value AllToAllRequest(int world) {
  Value::List ranks;
  for (int r = 0; r < world; ++r) {
    Value::List to;
    for (int d = 0; d < world; ++d) to.push_back(OneFloat(r * world + d));
    ranks.push_back(Value(std::move(to)));
  }
  return Value(Value::Map{{"ranks", Value(std::move(ranks))},
                          {"timeout_ms", Value(kOpTimeoutMs)}});
}

// The median time of `timed` runs of `op` after one warm-up.
template <typename Op>
absl::StatusOr<absl::Duration> MedianOf(int timed, Op op) {
  FERRY_RETURN_IF_ERROR(op());
  std::vector<absl::Duration> times;
  for (int i = 0; i < timed; ++i) {
    const absl::Time start = absl::Now();
    FERRY_RETURN_IF_ERROR(op());
    times.push_back(absl::Now() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Status of every worker; FAILED_PRECONDITION if any sees a dead peer.
absl::Status StatusOfAll(RpcClient& client) {
  for (const WorkerInfo& w : client.directory().workers()) {
    FERRY_ASSIGN_OR_RETURN(proto::WorkerStatus s,
                           client.GetStatus(w.name, absl::Seconds(30)));
    if (s.dead_peers_size() > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("false death: ", w.name, " sees ",
                       absl::StrJoin(s.dead_peers(), ", "), " dead"));
    }
  }
  return absl::OkStatus();
}

Row ScaleRow(const std::string& op, int64_t bytes, int world,
             absl::Duration t) {
  return {"scale", "op_time_us", "ferry", op,
          bytes,   world,        1,       absl::ToDoubleMicroseconds(t)};
}

// One job of `world` ranks: up, ops, status, down; its rows into `samples`.
absl::Status RunRound(const std::string& ferryctl, int world, int timed,
                      SampleSet* samples) {
  absl::Duration up;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Job> job,
                         Job::Up(ferryctl, world, &up));
  samples->Add(ScaleRow("rendezvous", 0, world, up));
  const Value all_reduce = AllReduceRequest(world);
  const Value all_to_all = AllToAllRequest(world);
  auto collective = [&](const char* op, const Value& request) {
    return [&job, op, &request]() -> absl::Status {
      return RunCollectiveFromClient(job->client(), op, request).status();
    };
  };
  for (const auto& [op, request] :
       {std::pair<const char*, const Value*>{"all_reduce", &all_reduce},
        {"all_to_all", &all_to_all}}) {
    absl::StatusOr<absl::Duration> t =
        MedianOf(timed, collective(op, *request));
    if (!t.ok()) return Annotate(t.status(), absl::StrCat(op, " on ", world));
    samples->Add(ScaleRow(op, 4, world, *t));
  }
  FERRY_ASSIGN_OR_RETURN(absl::Duration status, MedianOf(1, [&] {
                           return StatusOfAll(job->client());
                         }));
  samples->Add(ScaleRow("status", 0, world, status));
  const absl::Time start = absl::Now();
  FERRY_RETURN_IF_ERROR(job->Down());
  samples->Add(ScaleRow("down", 0, world, absl::Now() - start));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunScaleSuite(const ScaleSuiteOptions& options, Report* report) {
  const std::string ferryctl =
      options.ferryctl.empty() ? SiblingFerryctl() : options.ferryctl;
  const int max_world =
      options.quick ? std::min(options.max_world, 8) : options.max_world;
  const int timed = options.quick ? 2 : 5;
  for (int world = std::max(options.min_world, 2); world <= max_world;
       world *= 2) {
    SampleSet samples;
    for (int round = 0; round < options.rounds; ++round) {
      absl::Status s = RunRound(ferryctl, world, timed, &samples);
      if (!s.ok()) {
        return Annotate(
            s, absl::StrCat("scale: world ", world, ", round ", round + 1));
      }
    }
    for (const Row& row : samples.Medians()) report->Add(row);
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
