// The embedded master's death on real ferryd daemons (`ferryctl up`). A
// master whose process is gone (killed) is known at once from its host's
// refusals: the survivors fail their pending work naming worker0 and exit
// by themselves (exit 1, "exit" and worker0 as their last log line). A
// master gone silent (its process frozen, as a host that vanished would
// be) is given the heartbeat timeout: meanwhile the survivors answer
// `ferryctl --master=<worker1> status` and `down`. Times appear only as
// bounds for "it ended".
#include <signal.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "rpc/value/value.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::DaemonCluster;
using ::ferry::testing::PidAlive;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::ferry::testing::RunProcess;
using ::ferry::testing::WaitForPidGone;
using ::testing::HasSubstr;

// Long enough for a `status` to run between the master falling silent and
// the survivors giving up on it, on a loaded machine: status gives the
// silent worker0 10 s before it asks the others.
constexpr int64_t kHeartbeatMs = 20000;
// "It ended": many heartbeats long, so only a hang exceeds it.
constexpr absl::Duration kEnded = absl::Seconds(60);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class MasterDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(
        job_, DaemonCluster::Up(
                  3, {absl::StrCat("--heartbeat_timeout_ms=", kHeartbeatMs)}));
  }

  // `ferryctl --master=<rank's address> ARGS`, with the job's token.
  ProcessResult CtlAt(int rank, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {
        Runfile("tools/ferryctl"),
        absl::StrCat("--master=", job_->address(rank)),
        absl::StrCat("--token_file=", job_->token_file())};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<ProcessResult> r = RunProcess(argv, {}, kEnded);
    EXPECT_OK(r.status());
    return r.ok() ? *r : ProcessResult{};
  }

  // Each worker's "state" in `status` output, by rank.
  static std::vector<std::string> States(const ProcessResult& status) {
    std::vector<std::string> states;
    absl::StatusOr<Value> parsed = ParseJson(status.out);
    if (!parsed.ok() || parsed->Find("workers") == nullptr) return states;
    for (const Value& w : parsed->Find("workers")->as_list()) {
      const Value* state = w.Find("state");
      states.push_back(
          state != nullptr && state->is_string() ? state->as_string() : "?");
    }
    return states;
  }

  std::string Log(int rank) const {
    return ReadFile(absl::StrCat(job_->dir(), "/worker", rank, ".log"));
  }

  std::unique_ptr<DaemonCluster> job_;
};

TEST_F(MasterDeathTest, StatusAtAnyWorkerInAHealthyJob) {
  ProcessResult status = CtlAt(2, {"status"});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(States(status),
              ::testing::ElementsAre("running", "running", "running"))
      << status.out;
}

TEST_F(MasterDeathTest, SurvivorsOfAKilledMasterExitAtOnceNamingWorker0) {
  ASSERT_EQ(kill(job_->pid(0), SIGKILL), 0);
  for (int r : {1, 2}) {
    EXPECT_TRUE(WaitForPidGone(job_->pid(r), kEnded))
        << "worker" << r << " runs headless:\n"
        << Log(r);
    const std::string log = Log(r);
    EXPECT_THAT(log, HasSubstr("master_lost worker0 (the master) died")) << log;
    // Learnt from its host refusing connections, not by missing it for
    // the heartbeat timeout.
    EXPECT_THAT(log, HasSubstr("its process is gone")) << log;
    // ferryd logs "exit <why>" only on its way to exit status 1.
    EXPECT_THAT(log, HasSubstr("exit worker" + std::to_string(r) +
                               " stopped: the job ended: worker0"))
        << log;
  }
}

TEST_F(MasterDeathTest, SurvivorsOfASilentMasterAnswerStatusThenExit) {
  ASSERT_EQ(kill(job_->pid(0), SIGSTOP), 0);
  ProcessResult status = CtlAt(1, {"status"});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(States(status),
              ::testing::ElementsAre("unreachable", "running", "running"))
      << status.out;
  for (int r : {1, 2}) {
    EXPECT_TRUE(WaitForPidGone(job_->pid(r), kEnded))
        << "worker" << r << " runs headless:\n"
        << Log(r);
    const std::string log = Log(r);
    EXPECT_THAT(log, HasSubstr("master_lost worker0 (the master) died: no "
                               "contact for"))
        << log;
    EXPECT_THAT(log, HasSubstr("exit worker" + std::to_string(r) +
                               " stopped: the job ended: worker0"))
        << log;
  }
  kill(job_->pid(0), SIGKILL);
}

TEST_F(MasterDeathTest, DownAtASurvivorStopsTheJob) {
  ASSERT_EQ(kill(job_->pid(0), SIGSTOP), 0);
  ProcessResult down = CtlAt(1, {"down"});
  kill(job_->pid(0), SIGKILL);
  ASSERT_EQ(down.exit_code, 0) << down.Describe();
  for (int r : {1, 2}) {
    EXPECT_TRUE(WaitForPidGone(job_->pid(r), kEnded)) << "worker" << r << "\n"
                                                      << Log(r);
  }
}

}  // namespace
}  // namespace ferry
