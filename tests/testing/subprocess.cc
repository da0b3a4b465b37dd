#include "tests/testing/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/testing/await.h"

extern char** environ;

namespace ferry {
namespace testing {

namespace {

// How often a wait looks at the child while its pipes are quiet.
constexpr absl::Duration kPollSlice = absl::Milliseconds(10);

void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

absl::Status ErrnoError(absl::string_view what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(err)));
}

// The environment for the child: ours with `extra` added or replacing.
// Bazel runs tests without HOME; children get a private state directory
// in the test's scratch space (where ferryctl records the jobs it starts),
// as a user's shell would have one.
std::vector<std::string> MergedEnv(
    std::vector<std::pair<std::string, std::string>> extra) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  if (std::getenv("XDG_STATE_HOME") == nullptr && tmp != nullptr) {
    const std::string state = std::string(tmp) + "/state";
    mkdir(state.c_str(), 0700);
    extra.insert(extra.begin(), {"XDG_STATE_HOME", state});
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry = *e;
    bool replaced = std::any_of(extra.begin(), extra.end(), [&](auto& kv) {
      return absl::StartsWith(entry, kv.first + "=");
    });
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// What the forked child does to itself before exec (ProcessOptions).
struct ChildSetup {
  int netns_fd = -1;               // setns(2) into it if >= 0.
  const char* hostname = nullptr;  // New UTS namespace with it if set.
  size_t hostname_len = 0;
  int output_fd = -1;  // stdout and stderr if >= 0.
  bool die_with_parent = false;
  pid_t parent = 0;
};

// In the forked child: reports `errno` on `report_fd` and exits.
[[noreturn]] void ReportAndExit(int report_fd) {
  int err = errno;
  ssize_t ignored = write(report_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// In the forked child: enters the namespaces and arranges the death signal.
// Only async-signal-safe calls; false with errno set on failure.
bool EnterSetup(const ChildSetup& setup) {
  if (setup.die_with_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return false;
    // The parent may have died before prctl: then nobody would signal us.
    if (getppid() != setup.parent) _exit(127);
  }
  if (setup.netns_fd >= 0 && setns(setup.netns_fd, CLONE_NEWNET) != 0) {
    return false;
  }
  if (setup.hostname != nullptr &&
      (unshare(CLONE_NEWUTS) != 0 ||
       sethostname(setup.hostname, setup.hostname_len) != 0)) {
    return false;
  }
  return true;
}

// In the forked child: wires fds 0-2, resets signals, execs. Only
// async-signal-safe calls; reports a failure's errno on `report_fd`.
[[noreturn]] void ExecChild(char** argv, char** envp, int in_fd, int out_fd,
                            int err_fd, int report_fd,
                            const ChildSetup& setup) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  if (!EnterSetup(setup)) ReportAndExit(report_fd);
  if (setup.output_fd >= 0) out_fd = err_fd = setup.output_fd;
  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
    ReportAndExit(report_fd);
  }
  execve(argv[0], argv, envp);
  ReportAndExit(report_fd);
}

// Reads the exec report pipe: 0 if exec succeeded, else the child's errno.
int ReadExecReport(int fd) {
  int err = 0;
  ssize_t n;
  do {
    n = read(fd, &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof(err)) ? err : 0;
}

// Converts a waitpid status into the result's exit fields.
void SetExit(int status, ProcessResult* r) {
  if (WIFEXITED(status)) {
    r->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r->term_signal = WTERMSIG(status);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

namespace internal {

// The parent's ends of a child's stdio pipes and what went through them.
struct ChildIo {
  int in_fd = -1;  // -1 once all input was written (or the child closed it).
  int out_fd = -1;
  int err_fd = -1;
  std::string input;
  size_t written = 0;
  std::string out;
  std::string err;

  ~ChildIo() {
    CloseFd(&in_fd);
    CloseFd(&out_fd);
    CloseFd(&err_fd);
  }

  // Moves what is available into out/err; closes a pipe at EOF or error.
  static void ReadSome(int* fd, std::string* sink) {
    char buf[16384];
    while (*fd >= 0) {
      ssize_t n = read(*fd, buf, sizeof(buf));
      if (n > 0) {
        sink->append(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) CloseFd(fd);
        return;
      }
    }
  }

  void WriteSome() {
    while (in_fd >= 0 && written < input.size()) {
      ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (errno != EAGAIN && errno != EWOULDBLOCK) CloseFd(&in_fd);
        return;
      }
    }
    if (written >= input.size()) CloseFd(&in_fd);
  }

  // Waits up to `wait` for any pipe to be ready, then services them.
  void PumpOnce(absl::Duration wait) {
    pollfd fds[3];
    int n = 0;
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (out_fd >= 0) fds[n++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) fds[n++] = {err_fd, POLLIN, 0};
    int ms =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(wait)));
    if (n == 0) {
      absl::SleepFor(absl::Milliseconds(ms));
      return;
    }
    if (poll(fds, n, ms) <= 0) return;
    WriteSome();
    ReadSome(&out_fd, &out);
    ReadSome(&err_fd, &err);
  }

  // Takes whatever output is already buffered, without waiting.
  void DrainAvailable() {
    ReadSome(&out_fd, &out);
    ReadSome(&err_fd, &err);
  }
};

}  // namespace internal

namespace {

// The pipes between parent and child; closes whatever it still owns.
// O_CLOEXEC, so no other child inherits them.
struct StdioPipes {
  int in[2] = {-1, -1};  // [read, write]; read end is /dev/null if no input.
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int report[2] = {-1, -1};  // The exec failure report.

  ~StdioPipes() {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1],
                    &report[0], &report[1]}) {
      CloseFd(fd);
    }
  }

  absl::Status Create(bool with_input) {
    if (with_input) {
      if (pipe2(in, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
    } else {
      in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (in[0] < 0) return ErrnoError("open /dev/null", errno);
    }
    for (int* p : {out, err, report}) {
      if (pipe2(p, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
    }
    return absl::OkStatus();
  }

  // After fork, in the parent: drops the child's ends.
  void CloseChildEnds() {
    CloseFd(&in[0]);
    CloseFd(&out[1]);
    CloseFd(&err[1]);
    CloseFd(&report[1]);
  }

  // Hands the parent's stdio ends over, non-blocking.
  std::unique_ptr<internal::ChildIo> TakeParentEnds(std::string input) {
    auto io = std::make_unique<internal::ChildIo>();
    std::swap(io->in_fd, in[1]);
    std::swap(io->out_fd, out[0]);
    std::swap(io->err_fd, err[0]);
    for (int fd : {io->in_fd, io->out_fd, io->err_fd}) {
      if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    io->input = std::move(input);
    if (io->input.empty()) CloseFd(&io->in_fd);
    return io;
  }
};

// The files a child's setup needs, opened in the parent (close-on-exec)
// and closed once it forked.
struct ChildFds {
  int netns = -1;
  int output = -1;

  ~ChildFds() {
    CloseFd(&netns);
    CloseFd(&output);
  }

  absl::StatusOr<ChildSetup> Open(const ProcessOptions& options) {
    ChildSetup setup;
    if (!options.netns.empty()) {
      netns = open(options.netns.c_str(), O_RDONLY | O_CLOEXEC);
      if (netns < 0) return ErrnoError("open " + options.netns, errno);
    }
    if (!options.output_file.empty()) {
      output = open(options.output_file.c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (output < 0) return ErrnoError("open " + options.output_file, errno);
    }
    setup.netns_fd = netns;
    setup.output_fd = output;
    if (!options.hostname.empty()) {
      setup.hostname = options.hostname.c_str();
      setup.hostname_len = options.hostname.size();
    }
    setup.die_with_parent = options.die_with_parent;
    setup.parent = getpid();
    return setup;
  }
};

// Creates the child with its stdio wired to fresh pipes.
absl::StatusOr<std::pair<pid_t, std::unique_ptr<internal::ChildIo>>> Spawn(
    const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(argv[0], " is not executable"));
  }
  IgnoreSigpipeOnce();
  std::vector<std::string> args = argv;
  std::vector<std::string> env = MergedEnv(options.env);
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(env);
  StdioPipes pipes;
  absl::Status created = pipes.Create(options.stdin_text.has_value());
  if (!created.ok()) return created;
  ChildFds fds;
  absl::StatusOr<ChildSetup> setup = fds.Open(options);
  if (!setup.ok()) return setup.status();
  pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    ExecChild(c_args.data(), c_env.data(), pipes.in[0], pipes.out[1],
              pipes.err[1], pipes.report[1], *setup);
  }
  pipes.CloseChildEnds();
  if (int exec_errno = ReadExecReport(pipes.report[0]); exec_errno != 0) {
    int status;
    waitpid(pid, &status, 0);
    return ErrnoError(absl::StrCat("start ", argv[0]), exec_errno);
  }
  return std::make_pair(pid,
                        pipes.TakeParentEnds(options.stdin_text.value_or("")));
}

}  // namespace

std::string ProcessResult::Describe() const {
  std::string how = timed_out ? "timed out (killed with SIGKILL)"
                    : term_signal != 0
                        ? absl::StrCat("killed by signal ", term_signal)
                        : absl::StrCat("exited with ", exit_code);
  return absl::StrCat(how, "\n--- stdout ---\n", out, "\n--- stderr ---\n", err,
                      "\n--------------");
}

BackgroundProcess::BackgroundProcess(pid_t pid,
                                     std::unique_ptr<internal::ChildIo> io)
    : pid_(pid), io_(std::move(io)) {}

absl::StatusOr<std::unique_ptr<BackgroundProcess>> BackgroundProcess::Start(
    const std::vector<std::string>& argv, const ProcessOptions& options) {
  auto spawned = Spawn(argv, options);
  if (!spawned.ok()) return spawned.status();
  // Input that fits in the pipe reaches the child now, not at Wait.
  spawned->second->WriteSome();
  return std::unique_ptr<BackgroundProcess>(
      new BackgroundProcess(spawned->first, std::move(spawned->second)));
}

BackgroundProcess::~BackgroundProcess() {
  if (wait_status_.has_value()) return;
  kill(pid_, SIGKILL);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool BackgroundProcess::Exited() {
  if (wait_status_.has_value()) return true;
  int status;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  wait_status_ = status;
  return true;
}

ProcessResult BackgroundProcess::Wait(absl::Duration timeout) {
  if (result_.has_value()) return *result_;
  const absl::Time deadline = absl::Now() + timeout;
  ProcessResult r;
  while (!Exited()) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      kill(pid_, SIGKILL);
      int status;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      wait_status_ = status;
      r.timed_out = true;
      break;
    }
    io_->PumpOnce(std::min(left, kPollSlice));
  }
  // The child is gone: everything it wrote is in the pipes already.
  io_->DrainAvailable();
  SetExit(*wait_status_, &r);
  r.out = std::move(io_->out);
  r.err = std::move(io_->err);
  io_.reset();
  result_ = r;
  return r;
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const ProcessOptions& options,
                                         absl::Duration timeout) {
  auto process = BackgroundProcess::Start(argv, options);
  if (!process.ok()) return process.status();
  return (*process)->Wait(timeout);
}

bool PidAlive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // /proc/PID/stat: "pid (comm) S ..."; comm may contain ')' so use the last.
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) {
    return kill(pid, 0) == 0 || errno != ESRCH;
  }
  char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

bool WaitForPidGone(pid_t pid, absl::Duration timeout) {
  return AwaitTrue([&] { return !PidAlive(pid); }, timeout,
                   absl::Milliseconds(10));
}

}  // namespace testing
}  // namespace ferry
