// A job of real ferryd daemons for multi-process tests: started with
// `ferryctl up --port=0`, driven through ferryctl, and torn down with
// `ferryctl down`, then SIGKILL of any daemon still alive, so no process
// outlives the test. Binaries come from the test's runfiles (data deps
// //tools:ferryctl and //tools:ferryd).
//
//   ASSERT_OK_AND_ASSIGN(auto job, DaemonCluster::Up(4,
//   {"--heartbeat_timeout_ms=2000"})); ASSERT_OK_AND_ASSIGN(ProcessResult r,
//   job->Ctl({"status"}));
#ifndef FERRY_TESTS_TESTING_DAEMON_CLUSTER_H_
#define FERRY_TESTS_TESTING_DAEMON_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {

// $TEST_SRCDIR/ferry/<path>.
std::string Runfile(const std::string& path);

// A 127.0.0.1 port nobody listens on now (picked by the kernel, then
// released), for commands that must be given a port up front.
int UnusedPort();

class DaemonCluster {
 public:
  // Starts `world_size` daemons with `ferryd_flags` and waits until they
  // joined. FAILED_PRECONDITION with ferryctl's output if `up` failed.
  static absl::StatusOr<std::unique_ptr<DaemonCluster>> Up(
      int world_size, std::vector<std::string> ferryd_flags = {});
  // The same without a token (`up --token_file=`): plaintext on loopback,
  // every claim a caller makes believed, as in an --insecure job.
  // token_file() is empty.
  static absl::StatusOr<std::unique_ptr<DaemonCluster>> UpWithoutToken(
      int world_size, std::vector<std::string> ferryd_flags = {});
  // Down, then SIGKILL of survivors.
  ~DaemonCluster();

  // Runs `ferryctl --master=… ARGS` (stdin: `stdin_text` if set).
  absl::StatusOr<ProcessResult> Ctl(
      const std::vector<std::string>& args,
      std::optional<std::string> stdin_text = std::nullopt,
      absl::Duration timeout = absl::Seconds(60)) const;
  // The same in the background.
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> CtlInBackground(
      const std::vector<std::string>& args,
      std::optional<std::string> stdin_text = std::nullopt) const;

  const std::string& master() const { return master_; }
  // The job's token (up made it, in the job's private directory).
  const std::string& token_file() const { return token_file_; }
  // The token itself, trimmed ("" if the file cannot be read).
  std::string token() const;
  pid_t pid(int rank) const { return pids_[rank]; }
  // host:port a worker serves on.
  const std::string& address(int rank) const { return addresses_[rank]; }
  const std::string& dir() const { return dir_; }

 private:
  DaemonCluster() = default;
  static absl::StatusOr<std::unique_ptr<DaemonCluster>> Start(
      int world_size, std::vector<std::string> up_flags,
      std::vector<std::string> ferryd_flags);
  std::vector<std::string> Argv(const std::vector<std::string>& args) const;

  std::string dir_;
  std::string master_;
  std::string token_file_;
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_DAEMON_CLUSTER_H_
