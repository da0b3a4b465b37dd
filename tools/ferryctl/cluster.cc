#include "tools/ferryctl/cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "rpc/auth/net_util.h"
#include "rpc/base/status_util.h"
#include "rpc/value/json.h"
#include "tools/progress.h"
#include "tools/runtime/job_dir.h"

namespace ferry {
namespace ctl {

namespace {

bool IsExecutable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A pid that exists and is not a zombie.
bool Alive(int64_t pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ||
         stat[paren + 2] != 'Z';
}

// Runs `argv` as a daemon: its own session, stdin from /dev/null, output to
// `log` (in the private job directory). Double fork, so the daemon is not
// our child and outlives us.
absl::StatusOr<pid_t> SpawnDaemon(const std::vector<std::string>& argv,
                                  const std::string& log) {
  FERRY_ASSIGN_OR_RETURN(int out, jobs::OpenLog(log));
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    close(out);
    return absl::InternalError("pipe failed");
  }
  pid_t child = fork();
  if (child < 0) {
    close(out);
    return absl::InternalError("fork failed");
  }
  if (child == 0) {
    close(pipe_fds[0]);
    setsid();
    pid_t daemon = fork();
    if (daemon == 0) {
      close(pipe_fds[1]);
      int in = open("/dev/null", O_RDONLY);
      dup2(in, 0);
      dup2(out, 1);
      dup2(out, 2);
      for (int fd = 3; fd < 1024; ++fd) close(fd);
      std::vector<char*> args;
      for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    ssize_t ignored = write(pipe_fds[1], &daemon, sizeof(daemon));
    (void)ignored;
    _exit(0);
  }
  close(out);
  close(pipe_fds[1]);
  pid_t daemon = -1;
  ssize_t n = read(pipe_fds[0], &daemon, sizeof(daemon));
  close(pipe_fds[0]);
  waitpid(child, nullptr, 0);
  if (n != sizeof(daemon) || daemon <= 0) {
    return absl::InternalError("could not start a daemon");
  }
  return daemon;
}

// The error a ferryd reported ("ferryd: CODE: message") in its log, or a
// generic one with the log's tail.
absl::Status DaemonFailure(const std::string& log, const std::string& who) {
  std::vector<std::string> lines =
      absl::StrSplit(ReadFile(log), '\n', absl::SkipEmpty());
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    absl::string_view line = *it;
    if (!absl::ConsumePrefix(&line, "ferryd: ")) continue;
    size_t colon = line.find(": ");
    absl::StatusCode code;
    if (colon != absl::string_view::npos &&
        ParseStatusCodeName(line.substr(0, colon), &code)) {
      return absl::Status(code,
                          absl::StrCat(who, " failed: ", line.substr(colon + 2),
                                       " (log: ", log, ")"));
    }
  }
  std::string tail = lines.empty() ? "(empty log)" : lines.back();
  return absl::UnavailableError(
      absl::StrCat(who, " exited: ", tail, " (log: ", log, ")"));
}

// Waits for `path` to appear (written atomically by ferryd) while `pid` lives.
absl::StatusOr<std::string> WaitForFile(const std::string& path, pid_t pid,
                                        const std::string& log,
                                        const std::string& who,
                                        absl::Time deadline) {
  while (true) {
    if (access(path.c_str(), R_OK) == 0) {
      return std::string(absl::StripAsciiWhitespace(ReadFile(path)));
    }
    if (!Alive(pid)) return DaemonFailure(log, who);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(who, " did not get ready in time (log: ", log, ")"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// The address a daemon wrote to `path` (`text`), if it is one: an empty or
// garbled file (a full disk once left ferryd's empty) is refused, naming
// the file, rather than taken for the master.
absl::StatusOr<std::string> DaemonAddress(const std::string& text,
                                          const std::string& path,
                                          const std::string& who) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(text);
  if (parsed.ok() && !parsed->host.empty() && parsed->port > 0) return text;
  return absl::FailedPreconditionError(
      absl::StrCat(who, " wrote '", absl::CEscape(text.substr(0, 64)), "' to ",
                   path, ", not HOST:PORT (a full or broken disk?)"));
}

void KillAll(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGKILL);
}

absl::StatusOr<Value> StartDaemons(const UpOptions& o, const std::string& dir,
                                   const std::string& ferryd,
                                   std::vector<pid_t>* pids) {
  const absl::Time deadline = absl::Now() + o.timeout;
  std::string master = absl::StrCat("127.0.0.1:", o.port);
  Progress progress;
  Value::List workers;
  for (int rank = 0; rank < o.world_size; ++rank) {
    std::string base = absl::StrCat(dir, "/worker", rank);
    for (const char* ext : {".addr", ".ready"}) unlink((base + ext).c_str());
    std::vector<std::string> argv = {
        ferryd, absl::StrCat("--rank=", rank),
        absl::StrCat("--world_size=", o.world_size),
        absl::StrCat("--master=", master),
        absl::StrCat("--address_file=", base, ".addr"),
        absl::StrCat("--ready_file=", base, ".ready"),
        absl::StrCat("--startup_timeout_ms=",
                     absl::ToInt64Milliseconds(o.timeout)),
        // Failed ops leave their flight recorder dumps with the job.
        absl::StrCat("--dump_dir=", dir, "/flight_recorder")};
    argv.insert(argv.end(), o.ferryd_flags.begin(), o.ferryd_flags.end());
    progress.Update(absl::StrCat("starting worker", rank, " (", rank + 1,
                                 " of ", o.world_size, ")"));
    FERRY_ASSIGN_OR_RETURN(pid_t pid, SpawnDaemon(argv, base + ".log"));
    pids->push_back(pid);
    FERRY_RETURN_IF_ERROR(jobs::RecordDaemon(dir, rank, pid));
    if (rank == 0) {  // Its picked or given port is the master for the rest.
      FERRY_ASSIGN_OR_RETURN(
          std::string written,
          WaitForFile(base + ".addr", pid, base + ".log", "worker0", deadline));
      FERRY_ASSIGN_OR_RETURN(master,
                             DaemonAddress(written, base + ".addr", "worker0"));
    }
  }
  for (int rank = 0; rank < o.world_size; ++rank) {
    progress.Update(absl::StrCat("waiting for the workers to join: ", rank,
                                 " of ", o.world_size, " ready"));
    std::string base = absl::StrCat(dir, "/worker", rank);
    FERRY_ASSIGN_OR_RETURN(
        std::string ready,
        WaitForFile(base + ".ready", (*pids)[rank], base + ".log",
                    absl::StrCat("worker", rank), deadline));
    absl::StatusOr<Value> info = ParseJson(ready);
    if (!info.ok() || !info->is_map()) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker", rank, " wrote '",
                       absl::CEscape(ready.substr(0, 64)), "' to ", base,
                       ".ready, not its JSON description (a full or broken "
                       "disk?)"));
    }
    workers.push_back(*std::move(info));
  }
  return Value(Value::Map{
      {"master", master}, {"dir", dir}, {"workers", std::move(workers)}});
}

}  // namespace

absl::StatusOr<std::string> FindFerryd() {
  if (const char* env = std::getenv("FERRYD"); env && *env) {
    if (IsExecutable(env)) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("FERRYD=", env, " is not executable"));
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string path(self, n);
    std::string sibling = path.substr(0, path.rfind('/') + 1) + "ferryd";
    if (IsExecutable(sibling)) return sibling;
  }
  if (const char* path = std::getenv("PATH")) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      std::string candidate = absl::StrCat(dir, "/ferryd");
      if (IsExecutable(candidate)) return candidate;
    }
  }
  return absl::NotFoundError(
      "cannot find ferryd (set FERRYD, or put it next to ferryctl or on PATH)");
}

absl::StatusOr<Value> Up(const UpOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError("--world_size must be >= 1");
  }
  FERRY_ASSIGN_OR_RETURN(std::string ferryd, FindFerryd());
  FERRY_ASSIGN_OR_RETURN(const std::string dir, jobs::MakeJobDir(o.dir));
  UpOptions daemons = o;
  std::string token;
  if (!o.has_token) {  // Secure by default: a fresh token for this job.
    FERRY_ASSIGN_OR_RETURN(token, jobs::WriteNewToken(dir));
    daemons.ferryd_flags.push_back(absl::StrCat("--token_file=", token));
  }
  std::vector<pid_t> pids;
  absl::StatusOr<Value> result = StartDaemons(daemons, dir, ferryd, &pids);
  if (!result.ok()) {
    KillAll(pids);
    return result;
  }
  if (!token.empty()) result->as_map()["token_file"] = token;
  // Later commands find the token by the master's address.
  const std::string master = result->Find("master")->as_string();
  if (absl::Status recorded = jobs::RecordJob(master, dir); !recorded.ok()) {
    std::cerr << "ferryctl: warning: " << recorded.message()
              << "; pass --token_file=" << token
              << " to later commands for this job\n";
  }
  return result;
}

namespace {

// Whether `pid` is gone by `deadline` (never signalling it).
bool AwaitGone(int64_t pid, absl::Time deadline) {
  while (Alive(pid) && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(20));
  return !Alive(pid);
}

// Waits for `pid` (one we spawned) to exit; escalates to SIGTERM, then
// SIGKILL.
std::string AwaitExit(int64_t pid, absl::Time deadline) {
  if (AwaitGone(pid, deadline)) return "graceful";
  kill(static_cast<pid_t>(pid), SIGTERM);
  absl::Time term_deadline = absl::Now() + absl::Seconds(3);
  while (Alive(pid) && absl::Now() < term_deadline)
    absl::SleepFor(absl::Milliseconds(20));
  if (!Alive(pid)) return "terminated";
  kill(static_cast<pid_t>(pid), SIGKILL);
  absl::Time kill_deadline = absl::Now() + absl::Seconds(3);
  while (Alive(pid) && absl::Now() < kill_deadline)
    absl::SleepFor(absl::Milliseconds(20));
  return "killed";
}

}  // namespace

absl::StatusOr<Value> Down(Session& session) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  const std::vector<WorkerInfo> workers = client->rpc().directory().workers();
  const absl::Duration grace = std::min(session.bound(), absl::Seconds(20));
  std::vector<bool> reached;
  for (const WorkerInfo& w : workers) {
    // A worker already gone has nothing to shut down.
    reached.push_back(client->rpc()
                          .RequestShutdown(w.name, grace / 2, absl::Seconds(5))
                          .ok());
  }
  client->Close();
  // Only what this user's ferryctl spawned for this job is ever signalled:
  // the pid a worker reports is its claim, not proof.
  const std::optional<std::string> dir = jobs::FindJob(session.master());
  absl::flat_hash_set<pid_t> ours;
  if (dir.has_value()) {
    for (pid_t p : jobs::SpawnedDaemons(*dir)) ours.insert(p);
  }
  const absl::Time deadline = absl::Now() + grace;
  const std::string host = LocalHostName();
  Value::List stopped;
  bool all_gone = true;
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerInfo& w = workers[i];
    std::string how;
    if (w.host != host) {
      how = "remote";
    } else if (!reached[i] && !Alive(w.pid)) {
      how = "already_gone";
    } else if (ours.contains(static_cast<pid_t>(w.pid))) {
      how = AwaitExit(w.pid, deadline);
    } else {
      how = AwaitGone(w.pid, deadline) ? "graceful" : "still_running";
    }
    all_gone &= how != "still_running" && how != "remote";
    stopped.push_back(Value(Value::Map{
        {"name", w.name}, {"rank", w.rank}, {"pid", w.pid}, {"how", how}}));
  }
  if (all_gone) jobs::ForgetJob(session.master());
  return Value(Value::Map{{"stopped", std::move(stopped)}});
}

}  // namespace ctl
}  // namespace ferry
