#include "tools/bench/peer_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ferry {
namespace bench {

namespace {

constexpr size_t kMaxLine = 1 << 20;

absl::Status ErrnoError(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// In the forked child: its own process group (so the parent can end it
// with its children), the pipes as stdin/stdout, then exec. Only
// async-signal-safe calls.
[[noreturn]] void ExecChild(char** argv, int in_fd, int out_fd) {
  setpgid(0, 0);
  signal(SIGPIPE, SIG_DFL);
  if (dup2(in_fd, 0) >= 0 && dup2(out_fd, 1) >= 0) execvp(argv[0], argv);
  _exit(127);
}

// Whether `pid` exited within `wait` (reaped if so).
bool Reaped(pid_t pid, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

bool ReplyReader::Add(absl::string_view line) {
  if (done_) return true;
  if (line == "ok") return done_ = true;
  if (absl::StartsWith(line, "{")) {
    absl::StatusOr<Row> row = ParseRow(line);
    if (row.ok()) {
      rows_.push_back(*std::move(row));
    } else if (status_.ok()) {
      status_ = row.status();
    }
    return false;
  }
  if (absl::ConsumePrefix(&line, "unsupported")) {
    status_ = absl::UnimplementedError(absl::StripLeadingAsciiWhitespace(line));
  } else {
    status_ = absl::InternalError(line);
  }
  return done_ = true;
}

absl::StatusOr<std::vector<Row>> ReplyReader::Result(
    absl::string_view peer) const {
  if (!done_) return absl::InternalError(absl::StrCat(peer, ": no reply"));
  if (!status_.ok()) {
    return absl::Status(status_.code(),
                        absl::StrCat(peer, ": ", status_.message()));
  }
  return rows_;
}

absl::StatusOr<std::unique_ptr<PeerProcess>> PeerProcess::Start(
    std::vector<std::string> argv, absl::Duration ready_within) {
  // A peer that died must not kill us when we write to it.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
  if (argv.empty()) return absl::InvalidArgumentError("peer: no command");
  // Named after its script, if it has one (not "-c").
  std::string name =
      argv.size() > 1 && argv[1].rfind('-', 0) != 0 ? argv[1] : argv[0];
  name = name.substr(name.find_last_of('/') + 1);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return ErrnoError("pipe");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return ErrnoError("pipe");
  }
  pid_t pid = fork();
  if (pid == 0) ExecChild(args.data(), in[0], out[1]);
  close(in[0]), close(out[1]);
  if (pid < 0) {
    close(in[1]), close(out[0]);
    return ErrnoError("fork");
  }
  setpgid(pid, pid);  // Also here: whichever runs first.
  std::unique_ptr<PeerProcess> peer(
      new PeerProcess(pid, in[1], out[0], std::move(name)));
  absl::StatusOr<std::string> ready =
      peer->ReadLine(absl::Now() + ready_within);
  if (ready.ok() && *ready == "ok") return peer;
  peer->exit_wait_ = absl::ZeroDuration();  // Not waited for: killed.
  if (!ready.ok()) return ready.status();
  absl::string_view line = *ready;
  if (absl::ConsumePrefix(&line, "unsupported ")) {
    return absl::UnimplementedError(absl::StrCat(peer->name(), ": ", line));
  }
  return absl::UnavailableError(
      absl::StrCat(peer->name(), " did not start: ", *ready));
}

PeerProcess::PeerProcess(pid_t pid, int in_fd, int out_fd, std::string name)
    : pid_(pid), in_fd_(in_fd), out_fd_(out_fd), name_(std::move(name)) {}

PeerProcess::~PeerProcess() {
  CloseFd(&in_fd_);  // EOF on its stdin: the peer shuts its ranks down.
  if (!Reaped(pid_, exit_wait_)) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  CloseFd(&out_fd_);
}

absl::StatusOr<std::vector<Row>> PeerProcess::Request(absl::string_view request,
                                                      absl::Duration deadline) {
  if (broken_) {
    return absl::UnavailableError(
        absl::StrCat(name_, ": an earlier request failed"));
  }
  const absl::Time until = absl::Now() + deadline;
  std::string line = absl::StrCat(request, "\n");
  for (size_t sent = 0; sent < line.size();) {
    ssize_t n = write(in_fd_, line.data() + sent, line.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      broken_ = true;
      return ErrnoError(absl::StrCat(name_, ": writing the request"));
    }
    sent += static_cast<size_t>(n);
  }
  ReplyReader reply;
  bool done = false;
  while (!done) {
    absl::StatusOr<std::string> next = ReadLine(until);
    if (!next.ok()) {
      broken_ = true;
      return next.status();
    }
    done = reply.Add(*next);
  }
  return reply.Result(name_);
}

absl::StatusOr<std::string> PeerProcess::ReadLine(absl::Time deadline) {
  while (true) {
    size_t end = buffered_.find('\n');
    if (end != std::string::npos) {
      std::string line = buffered_.substr(0, end);
      buffered_.erase(0, end + 1);
      return line;
    }
    if (buffered_.size() > kMaxLine) {
      return absl::InternalError(
          absl::StrCat(name_, ": a line over ", kMaxLine, " bytes"));
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat(name_, ": no answer in time"));
    }
    pollfd p{out_fd_, POLLIN, 0};
    int ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, INT_MAX));
    if (poll(&p, 1, ms) < 0 && errno != EINTR) return ErrnoError("poll");
    if (p.revents == 0) continue;
    char buf[65536];
    ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat(name_, " exited"));
    }
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace bench
}  // namespace ferry
