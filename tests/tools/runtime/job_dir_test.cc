// ferryctl's private job state: another local user can neither read a
// job's token, nor redirect its files through symlinks, nor make
// `ferryctl down` signal a process it did not spawn.
#include "tools/runtime/job_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/await.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace jobs {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

class JobDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/jobdir-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }

  static mode_t Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  std::string root_;
};

TEST_F(JobDirTest, AFreshJobDirectoryAndItsTokenArePrivate) {
  setenv("XDG_RUNTIME_DIR", root_.c_str(), 1);
  ASSERT_OK_AND_ASSIGN(std::string dir, MakeJobDir(""));
  EXPECT_EQ(dir.rfind(root_ + "/ferry-job-", 0), 0u) << dir;
  EXPECT_EQ(Mode(dir), 0700);
  ASSERT_OK_AND_ASSIGN(std::string token, WriteNewToken(dir));
  EXPECT_EQ(Mode(token), 0600);
  // Two jobs never share a directory (it is not predictable).
  ASSERT_OK_AND_ASSIGN(std::string other, MakeJobDir(""));
  EXPECT_NE(dir, other);
}

TEST_F(JobDirTest, ARequestedDirectoryOthersMayWriteIsRefused) {
  const std::string open = root_ + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  EXPECT_THAT(MakeJobDir(open),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("may be written by group or others")));
}

TEST_F(JobDirTest, ASymlinkIsNeverFollowed) {
  const std::string real = root_ + "/real";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  const std::string link = root_ + "/link";
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  EXPECT_THAT(MakeJobDir(link),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not a directory (or a symlink)")));
  // A log (or token) planted as a symlink to a file elsewhere.
  const std::string victim = root_ + "/victim";
  Write(victim, "keep me");
  const std::string log = real + "/worker0.log";
  ASSERT_EQ(symlink(victim.c_str(), log.c_str()), 0);
  EXPECT_THAT(OpenLog(log).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_EQ(symlink(victim.c_str(), (real + "/token").c_str()), 0);
  EXPECT_THAT(WriteNewToken(real).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");
}

TEST_F(JobDirTest, DownSignalsOnlyTheDaemonsItSpawned) {
  const std::string dir = root_ + "/job";
  ASSERT_OK(MakeJobDir(dir).status());
  // Rank 0: a process whose command line names this job's address file,
  // as ferryctl's ferryd does. Rank 1: a pid a peer might have reported
  // (this test's own), which names nothing of the job.
  const std::string marker =
      absl::StrCat("--address_file=", dir, "/worker0.addr");
  // sh blocks in its builtin `read` on a pipe nobody writes: one process,
  // alive until killed, with the marker among its arguments.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t ours = fork();
  ASSERT_GE(ours, 0);
  if (ours == 0) {
    dup2(pipe_fds[0], 0);
    execl("/bin/sh", "sh", "-c", "read x", "sh", marker.c_str(), nullptr);
    _exit(127);
  }
  close(pipe_fds[0]);
  ASSERT_OK(RecordDaemon(dir, 0, ours));
  ASSERT_OK(RecordDaemon(dir, 1, getpid()));
  // exec has happened once the command line shows the marker (bounded).
  EXPECT_TRUE(AwaitTrue([&] { return CommandLineHas(ours, marker); },
                        absl::Seconds(10)));
  EXPECT_EQ(SpawnedDaemons(dir), std::vector<pid_t>{ours});
  kill(ours, SIGKILL);
  waitpid(ours, nullptr, 0);
  close(pipe_fds[1]);
  // Gone (and its pid free for reuse): not signalled either.
  EXPECT_TRUE(SpawnedDaemons(dir).empty());
}

TEST_F(JobDirTest, LaterCommandsFindTheJobByItsMaster) {
  setenv("XDG_STATE_HOME", root_.c_str(), 1);
  const std::string dir = root_ + "/job";
  ASSERT_OK(MakeJobDir(dir).status());
  ASSERT_OK(RecordJob("127.0.0.1:29500", dir));
  EXPECT_EQ(Mode(root_ + "/ferry/jobs"), 0700);
  EXPECT_EQ(FindJob("127.0.0.1:29500"), std::optional<std::string>(dir));
  EXPECT_EQ(FindJob("127.0.0.1:29501"), std::nullopt);
  // A recorded directory that is no longer private is not trusted.
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  EXPECT_EQ(FindJob("127.0.0.1:29500"), std::nullopt);
  ForgetJob("127.0.0.1:29500");
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  EXPECT_EQ(FindJob("127.0.0.1:29500"), std::nullopt);
}

}  // namespace
}  // namespace jobs
}  // namespace ferry
