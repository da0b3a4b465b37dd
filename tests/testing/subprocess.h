// Running other programs from tests: a command to completion with a timeout,
// or in the background to be waited for later. Every wait is bounded; a
// child that outlives its bound is killed with SIGKILL and reported so.
//
//   ASSERT_OK_AND_ASSIGN(ProcessResult r,
//                        RunProcess({"/bin/echo", "hi"}, {},
//                        absl::Seconds(5)));
//   EXPECT_EQ(r.exit_code, 0) << r.Describe();
//
//   ASSERT_OK_AND_ASSIGN(auto bg, BackgroundProcess::Start({server, ...}));
//   ...
//   ProcessResult r = bg->Wait(absl::Seconds(20));
//   EXPECT_FALSE(r.timed_out) << r.Describe();
//
// Contracts common to both:
// - argv[0] is a path to an executable (no PATH search); argv is passed as is.
// - The child's environment is this process's, with `env` entries added or
//   replacing same-named ones. Its signal mask is cleared and its signal
//   dispositions are the defaults.
// - stdin is `stdin_text` (then closed), or /dev/null if unset. stdout and
//   stderr are captured whole into the result, or appended to
//   `output_file` if set (then the result's out/err are empty).
// - With `netns` set, the child joins that network namespace (setns(2),
//   e.g. /run/netns/NAME) before exec; with `hostname` set, it gets a UTS
//   namespace of its own with that host name. With `die_with_parent`, the
//   kernel SIGKILLs it when the thread that started it exits (prctl
//   PR_SET_PDEATHSIG), so it cannot outlive a test killed with SIGKILL:
//   start such children from a thread that lives as long as they should.
// - Using this library sets SIGPIPE to ignored in the calling process, so a
//   child that exits without reading its stdin cannot kill the test.
// - Only the direct child is waited for or killed. Its own descendants (e.g.
//   daemons it detaches) are not; output they write to the inherited pipes
//   after the child exited is not collected.
#ifndef FERRY_TESTS_TESTING_SUBPROCESS_H_
#define FERRY_TESTS_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ferry {
namespace testing {

namespace internal {
struct ChildIo;  // The parent's ends of a child's stdio pipes.
}  // namespace internal

struct ProcessOptions {
  std::vector<std::pair<std::string, std::string>> env;  // NAME, value.
  std::optional<std::string> stdin_text;                 // unset: /dev/null.
  std::string output_file;  // Non-empty: stdout and stderr appended here.
  std::string netns;        // Non-empty: a network namespace file to join.
  std::string hostname;     // Non-empty: own UTS namespace, this host name.
  bool die_with_parent = false;  // SIGKILL when the starting thread exits.
};

struct ProcessResult {
  int exit_code = -1;      // The exit status, or -1 if killed by a signal.
  int term_signal = 0;     // The signal that ended it, or 0.
  bool timed_out = false;  // Still running at its bound, so we SIGKILLed it.
  std::string out;         // Everything it wrote to stdout.
  std::string err;         // Everything it wrote to stderr.

  // A multi-line summary for assertion messages: how it ended and its output.
  std::string Describe() const;
};

// Runs `argv` and waits for it up to `timeout`; if it is still running then,
// kills it (SIGKILL), reaps it and sets `timed_out`. Errors only if the
// process could not be started (pipe/fork/exec failure, INTERNAL or
// NOT_FOUND naming the program).
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const ProcessOptions& options,
                                         absl::Duration timeout);

// A child started now and waited for later. Its input is written at once
// as far as the pipe takes it (64 KiB), the rest during Wait; its output is
// collected only while Wait runs, so a child writing more than a pipe
// buffer before Wait blocks until then. Not thread-safe.
class BackgroundProcess {
 public:
  // Starts `argv` (see the file comment); errors as RunProcess.
  static absl::StatusOr<std::unique_ptr<BackgroundProcess>> Start(
      const std::vector<std::string>& argv, const ProcessOptions& options = {});

  // Kills (SIGKILL) and reaps the child if it was not waited for.
  ~BackgroundProcess();

  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Whether the child has exited (non-blocking; reaps it if so).
  bool Exited();

  // Waits up to `timeout` for the child to exit, collecting its output; if
  // it is still running then, kills it (SIGKILL) and sets `timed_out`. The
  // first call returns the result; later calls return it again at once.
  ProcessResult Wait(absl::Duration timeout);

 private:
  BackgroundProcess(pid_t pid, std::unique_ptr<internal::ChildIo> io);

  pid_t pid_;
  std::unique_ptr<internal::ChildIo> io_;
  std::optional<int> wait_status_;       // Set once reaped.
  std::optional<ProcessResult> result_;  // Set once Wait finished.
};

// Whether `pid` is a live process: it exists and is not a zombie. Works for
// processes that are not our children (e.g. detached daemons).
bool PidAlive(pid_t pid);

// Polls PidAlive until it is false or `timeout` passed; returns whether the
// process is gone.
bool WaitForPidGone(pid_t pid, absl::Duration timeout);

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_SUBPROCESS_H_
