// A replacement worker on the embedded master, on real processes: a job of
// three ferryd (`ferryctl up`: a token, so every call carries its node's
// credential), worker2 killed with SIGKILL. A new ferryd for rank 2,
// started at once, waits until the master declared the old one dead and
// rejoins as a new incarnation: calls reach
// it both ways, a world all_reduce includes it, and the RRef the old
// worker2 owned reports that its owner died. A second process for the
// (live) rank is refused.
#include <signal.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/auth/security.h"
#include "rpc/value/json.h"
#include "rref/rref.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::BackgroundProcess;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::ProcessOptions;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::ferry::testing::RunProcess;
using ::ferry::testing::StatusIs;
using ::ferry::testing::WaitForPidGone;
using ::testing::HasSubstr;

constexpr int64_t kHeartbeatMs = 2000;
// Bound on any one step (a death detected, a process joining).
constexpr absl::Duration kWait = absl::Seconds(30);

class ReplacementE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(
        job_, DaemonCluster::Up(
                  3, {absl::StrCat("--heartbeat_timeout_ms=", kHeartbeatMs)}));
    RpcClientOptions options;
    options.master = job_->master();
    ASSERT_OK_AND_ASSIGN(options.security,
                         Security::Load({.token_file = job_->token_file()}));
    ASSERT_OK_AND_ASSIGN(client_, ClientImpl::Connect(options));
  }

  void TearDown() override {
    client_.reset();
    job_.reset();  // ferryctl down: the replacement leaves with the others.
  }

  // A ferryd for rank 2 of the job; `name` names its log and ready file.
  std::unique_ptr<BackgroundProcess> StartRank2(const std::string& name) {
    ProcessOptions options;
    options.output_file = absl::StrCat(job_->dir(), "/", name, ".log");
    options.die_with_parent = true;
    auto p = BackgroundProcess::Start(
        {Runfile("tools/ferryd"), "--rank=2", "--world_size=3",
         absl::StrCat("--master=", job_->master()),
         absl::StrCat("--token_file=", job_->token_file()),
         absl::StrCat("--heartbeat_timeout_ms=", kHeartbeatMs),
         absl::StrCat("--ready_file=", job_->dir(), "/", name, ".ready")},
        options);
    EXPECT_OK(p.status());
    return p.ok() ? *std::move(p) : nullptr;
  }

  // Whether `done()` held within kWait (looked at every 50 ms).
  static bool Eventually(const std::function<bool()>& done) {
    return AwaitTrue(done, kWait, absl::Milliseconds(50));
  }

  ProcessResult Ctl(const std::vector<std::string>& args,
                    std::optional<std::string> stdin_text = std::nullopt) {
    absl::StatusOr<ProcessResult> r = job_->Ctl(args, std::move(stdin_text));
    EXPECT_OK(r.status());
    return r.ok() ? *r : ProcessResult{};
  }

  std::unique_ptr<DaemonCluster> job_;
  std::unique_ptr<ClientImpl> client_;
};

TEST_F(ReplacementE2eTest, AKilledWorkerIsReplacedWhileTheMasterLives) {
  ASSERT_OK_AND_ASSIGN(RRef old, client_->rrefs().Remote("worker2", "arange",
                                                         {Value(int64_t{3})}));
  ASSERT_OK(old.ToHere());
  // An operator watches worker1: the death and the join come as lines
  // (--all: from the job's start, whenever the watch's first poll lands).
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<BackgroundProcess> watch,
      job_->CtlInBackground({"watch", "worker1", "--count=2", "--all"}));
  ASSERT_EQ(kill(job_->pid(2), SIGKILL), 0);
  ASSERT_TRUE(WaitForPidGone(job_->pid(2), kWait));
  // A new process started at once (a supervisor's restart), while the
  // master has not yet declared the old one dead, waits for that and joins.
  const absl::Time started = absl::Now();
  std::unique_ptr<BackgroundProcess> replacement = StartRank2("replacement");
  ASSERT_TRUE(Eventually([&] {
    return std::ifstream(job_->dir() + "/replacement.ready").good() ||
           replacement->Exited();
  }));
  ASSERT_FALSE(replacement->Exited())
      << replacement->Wait(absl::ZeroDuration()).Describe();
  std::cout << "[timing] replacement worker2 joined in "
            << absl::FormatDuration(absl::Now() - started) << std::endl;
  ProcessResult watched = watch->Wait(kWait);
  EXPECT_EQ(watched.exit_code, 0) << watched.Describe();
  std::vector<std::string> lines =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(watched.out), '\n');
  ASSERT_EQ(lines.size(), 2u) << watched.Describe();
  ASSERT_OK_AND_ASSIGN(Value died, ParseJson(lines[0]));
  ASSERT_OK_AND_ASSIGN(Value joined, ParseJson(lines[1]));
  EXPECT_EQ(*died.Find("event"), Value("died")) << lines[0];
  EXPECT_EQ(*died.Find("rank"), Value(2)) << lines[0];
  EXPECT_EQ(*died.Find("seen_by"), Value("worker1")) << lines[0];
  EXPECT_EQ(*joined.Find("event"), Value("replaced")) << lines[1];
  EXPECT_EQ(*joined.Find("worker"), Value("worker2")) << lines[1];

  // Calls reach it, and it reaches the others (its fresh credential
  // admitted everywhere).
  ProcessResult call = Ctl({"call", "worker2", "add", "[1, 2]"});
  EXPECT_EQ(call.exit_code, 0) << call.Describe();
  EXPECT_THAT(call.out, HasSubstr("3"));
  const std::string script = job_->dir() + "/rejoined.ferry";
  std::ofstream(script) << "A = remote worker2 add [40, 2]\n"
                           "X = call worker1 to_here [$A]\n"
                           "expect $X 42\n"
                           "B = remote worker0 add [1, 2]\n"
                           "Y = call worker2 to_here [$B]\n"
                           "expect $Y 3\n";
  ProcessResult run = Ctl({"run", script});
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  // A world all_reduce includes the new incarnation.
  ProcessResult reduce = Ctl({"collective", "all_reduce"},
                             R"({"ranks": [{"dtype":"float32","data":[1]},
                        {"dtype":"float32","data":[2]},
                        {"dtype":"float32","data":[3]}], "op": "sum"})");
  EXPECT_EQ(reduce.exit_code, 0) << reduce.Describe();
  EXPECT_THAT(reduce.out, HasSubstr(R"({"dtype":"float32","data":[6]})"));

  // The old incarnation's value went with it; new ones live on the new.
  EXPECT_THAT(old.ToHere(), StatusIs(absl::StatusCode::kUnavailable,
                                     HasSubstr("owner worker2 died")));
  ASSERT_TRUE(Eventually(
      [&] { return !client_->rpc().membership().DownReason(2).has_value(); }));
  ASSERT_OK_AND_ASSIGN(
      RRef fresh,
      client_->rrefs().Remote("worker2", "arange", {Value(int64_t{2})}));
  EXPECT_OK(fresh.ToHere());

  // The rank is held by a live process now: another one is refused at once.
  std::unique_ptr<BackgroundProcess> intruder = StartRank2("intruder");
  ProcessResult refused = intruder->Wait(kWait);
  EXPECT_EQ(refused.exit_code, 1) << refused.Describe();
  std::ifstream log(job_->dir() + "/intruder.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("ALREADY_EXISTS"));
  EXPECT_THAT(text.str(), HasSubstr("rank 2 is already taken by worker2"));

  // Down reaches every worker, the replacement included.
  old = RRef();
  fresh = RRef();
  client_.reset();
  ProcessResult down = Ctl({"down"});
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
  ProcessResult exited = replacement->Wait(kWait);
  EXPECT_EQ(exited.exit_code, 0) << exited.Describe();
}

}  // namespace
}  // namespace ferry
