#include "tests/testing/daemon_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "rpc/value/json.h"

namespace ferry {
namespace testing {

namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

ProcessOptions CtlOptions(std::optional<std::string> stdin_text) {
  ProcessOptions o;
  o.env = {{"FERRYD", Runfile("tools/ferryd")}};
  o.stdin_text = std::move(stdin_text);
  return o;
}

}  // namespace

std::string Runfile(const std::string& path) {
  return absl::StrCat(Env("TEST_SRCDIR", "."), "/ferry/", path);
}

int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<DaemonCluster>> DaemonCluster::Up(
    int world_size, std::vector<std::string> ferryd_flags) {
  return Start(world_size, {}, std::move(ferryd_flags));
}

absl::StatusOr<std::unique_ptr<DaemonCluster>> DaemonCluster::UpWithoutToken(
    int world_size, std::vector<std::string> ferryd_flags) {
  return Start(world_size, {"--token_file="}, std::move(ferryd_flags));
}

absl::StatusOr<std::unique_ptr<DaemonCluster>> DaemonCluster::Start(
    int world_size, std::vector<std::string> up_flags,
    std::vector<std::string> ferryd_flags) {
  static std::atomic<int> counter{0};
  std::unique_ptr<DaemonCluster> job(new DaemonCluster());
  job->dir_ = absl::StrCat(Env("TEST_TMPDIR", "/tmp"), "/cluster-", getpid(),
                           "-", counter++);
  mkdir(job->dir_.c_str(), 0755);
  std::vector<std::string> args = {
      "up", absl::StrCat("--world_size=", world_size), "--port=0",
      absl::StrCat("--dir=", job->dir_)};
  args.insert(args.end(), up_flags.begin(), up_flags.end());
  if (!ferryd_flags.empty()) {
    args.push_back("--");
    args.insert(args.end(), ferryd_flags.begin(), ferryd_flags.end());
  }
  absl::StatusOr<ProcessResult> up = job->Ctl(args);
  if (!up.ok()) return up.status();
  absl::StatusOr<Value> cluster = ParseJson(up->out);
  if (up->exit_code != 0 || !cluster.ok() ||
      cluster->Find("master") == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("ferryctl up: ", up->Describe()));
  }
  job->master_ = cluster->Find("master")->as_string();
  if (const Value* token = cluster->Find("token_file")) {
    job->token_file_ = token->as_string();
  }
  for (const Value& w : cluster->Find("workers")->as_list()) {
    job->pids_.push_back(static_cast<pid_t>(w.Find("pid")->as_int()));
    job->addresses_.push_back(w.Find("address")->as_string());
  }
  return job;
}

DaemonCluster::~DaemonCluster() {
  if (!master_.empty()) (void)Ctl({"down"});
  for (pid_t pid : pids_) {
    if (PidAlive(pid)) kill(pid, SIGKILL);
  }
}

std::vector<std::string> DaemonCluster::Argv(
    const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {Runfile("tools/ferryctl")};
  if (!master_.empty()) argv.push_back(absl::StrCat("--master=", master_));
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

absl::StatusOr<ProcessResult> DaemonCluster::Ctl(
    const std::vector<std::string>& args, std::optional<std::string> stdin_text,
    absl::Duration timeout) const {
  return RunProcess(Argv(args), CtlOptions(std::move(stdin_text)), timeout);
}

absl::StatusOr<std::unique_ptr<BackgroundProcess>>
DaemonCluster::CtlInBackground(const std::vector<std::string>& args,
                               std::optional<std::string> stdin_text) const {
  return BackgroundProcess::Start(Argv(args),
                                  CtlOptions(std::move(stdin_text)));
}

std::string DaemonCluster::token() const {
  std::ifstream in(token_file_);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

}  // namespace testing
}  // namespace ferry
