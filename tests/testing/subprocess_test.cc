#include "tests/testing/subprocess.h"

#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kBound = absl::Seconds(20);

ProcessResult Sh(const std::string& script, const ProcessOptions& options = {},
                 absl::Duration bound = kBound) {
  absl::StatusOr<ProcessResult> r =
      RunProcess({"/bin/sh", "-c", script}, options, bound);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ProcessResult();
}

TEST(RunProcessTest, CapturesExitCodeAndBothStreams) {
  ProcessResult r = Sh("echo out; echo err >&2; exit 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(RunProcessTest, FeedsStdinAndDefaultsToDevNull) {
  ProcessOptions o;
  o.stdin_text = "hello\nworld\n";
  EXPECT_EQ(Sh("cat", o).out, "hello\nworld\n");
  EXPECT_EQ(Sh("cat").out, "");
}

TEST(RunProcessTest, LargeInputAndOutputDoNotDeadlock) {
  ProcessOptions o;
  o.stdin_text = std::string(1 << 20, 'x');
  ProcessResult r = Sh("cat", o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.size(), size_t{1} << 20);
}

TEST(RunProcessTest, AddsAndReplacesEnvironment) {
  ProcessOptions o;
  o.env = {{"FERRY_SUBPROCESS_TEST", "a b"}, {"HOME", "/nowhere"}};
  EXPECT_EQ(Sh("echo \"$FERRY_SUBPROCESS_TEST|$HOME\"", o).out,
            "a b|/nowhere\n");
}

TEST(RunProcessTest, AppendsOutputToAFileWhenAsked) {
  const std::string file =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/output_file.log");
  ProcessOptions o;
  o.output_file = file;
  EXPECT_EQ(Sh("echo one; echo two >&2", o).out, "");
  EXPECT_EQ(Sh("echo three", o).err, "");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "one\ntwo\nthree\n");
}

TEST(RunProcessTest, DiesWithTheThreadThatStartedIt) {
  std::unique_ptr<BackgroundProcess> child;
  std::thread starter([&] {
    ProcessOptions o;
    o.die_with_parent = true;
    auto p = BackgroundProcess::Start({"/bin/sh", "-c", "exec sleep 30"}, o);
    ASSERT_TRUE(p.ok()) << p.status();
    child = *std::move(p);
  });
  starter.join();
  ASSERT_NE(child, nullptr);
  // The starting thread is gone: the kernel killed the child.
  ProcessResult r = child->Wait(kBound);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
}

TEST(RunProcessTest, UnreadableNamespaceIsAnError) {
  ProcessOptions o;
  o.netns = "/nonexistent/netns";
  EXPECT_FALSE(RunProcess({"/bin/true"}, o, kBound).ok());
}

TEST(RunProcessTest, KillsOnTimeoutAndSaysSo) {
  const absl::Time start = absl::Now();
  ProcessResult r = Sh("echo started; exec sleep 30", {}, absl::Seconds(1));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // A hang check.
  EXPECT_THAT(r.Describe(), HasSubstr("timed out"));
}

TEST(RunProcessTest, MissingProgramIsAnError) {
  EXPECT_FALSE(RunProcess({"/nonexistent/program"}, {}, kBound).ok());
  EXPECT_FALSE(RunProcess({}, {}, kBound).ok());
}

TEST(BackgroundProcessTest, WaitsLaterAndReportsSignals) {
  auto p = BackgroundProcess::Start({"/bin/sh", "-c", "exec sleep 30"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(PidAlive((*p)->pid()));
  EXPECT_FALSE((*p)->Exited());
  ASSERT_EQ(kill((*p)->pid(), SIGTERM), 0);
  ProcessResult r = (*p)->Wait(kBound);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGTERM);
  EXPECT_FALSE(PidAlive((*p)->pid()));
  EXPECT_EQ((*p)->Wait(kBound).term_signal, SIGTERM);  // Same result again.
}

TEST(BackgroundProcessTest, DestructorKillsAnUnwaitedChild) {
  pid_t pid;
  {
    auto p = BackgroundProcess::Start({"/bin/sh", "-c", "exec sleep 30"});
    ASSERT_TRUE(p.ok()) << p.status();
    pid = (*p)->pid();
  }
  EXPECT_TRUE(WaitForPidGone(pid, kBound));
}

TEST(PidAliveTest, NonexistentPidIsNotAlive) {
  EXPECT_FALSE(PidAlive(0));
  EXPECT_FALSE(PidAlive(-1));
  EXPECT_TRUE(PidAlive(getpid()));
}

}  // namespace
}  // namespace testing
}  // namespace ferry
