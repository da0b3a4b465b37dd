// Every file ferryd, ferryctl and the job directory write is written whole
// or reported with the OS's reason (issue 25, F11: on a full disk ferryd
// renamed an empty address file into place and nobody said why).
#include "tools/runtime/file_write.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/full_disk.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The entries of `dir` besides . and .. and a full disk's filler.
int Entries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != ".." && name != ".fill") ++n;
  }
  closedir(d);
  return n;
}

class FileWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/write-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  std::string dir_;
};

TEST_F(FileWriteTest, WritesTheWholeFileWithItsMode) {
  const std::string path = dir_ + "/token";
  ASSERT_OK(WriteFile(path, "secret\n"));
  EXPECT_EQ(Read(path), "secret\n");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string addr = dir_ + "/worker0.addr";
  ASSERT_OK(WriteFile(addr, "127.0.0.1:1", {.mode = 0644, .atomic = true}));
  ASSERT_OK(WriteFile(addr, "127.0.0.1:2", {.mode = 0644, .atomic = true}));
  EXPECT_EQ(Read(addr), "127.0.0.1:2");
  ASSERT_EQ(stat(addr.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(Entries(dir_), 2);  // No temporary file left.
}

// /dev/full fails every write with ENOSPC: needs no root.
TEST_F(FileWriteTest, AFailedWriteSaysWhy) {
  EXPECT_THAT(WriteFile("/dev/full", "127.0.0.1:1"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("cannot write '/dev/full'"),
                             HasSubstr("No space left on device"))));
}

TEST_F(FileWriteTest, AMissingDirectoryIsAFailedPrecondition) {
  for (bool atomic : {false, true}) {
    EXPECT_THAT(WriteFile(dir_ + "/nope/file", "x", {.atomic = atomic}),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("No such file or directory")));
  }
}

TEST_F(FileWriteTest, NeverWritesThroughASymlink) {
  const std::string victim = dir_ + "/victim";
  ASSERT_OK(WriteFile(victim, "keep me"));
  const std::string link = dir_ + "/token";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_THAT(WriteFile(link, "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Read(victim), "keep me");
}

// The finding itself: on a full file system an atomic write fails with the
// reason and leaves what was there (nothing, or the old file), never an
// empty file in its place, and no temporary file.
TEST(FileWriteFullDiskTest, AFullDiskLeavesNoEmptyFileBehind) {
  if (absl::Status s = testing::FullDiskAvailable(); !s.ok()) {
    GTEST_SKIP() << s;
  }
  std::string pattern =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/full-XXXXXX");
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string dir = pattern;
  // One page left: the old address file takes it.
  ASSERT_OK(testing::MakeFullDiskHere(dir, /*free_pages=*/1));
  const std::string addr = dir + "/worker0.addr";
  ASSERT_OK(WriteFile(addr, "127.0.0.1:1", {.mode = 0644, .atomic = true}));
  const absl::Status s =
      WriteFile(addr, "127.0.0.1:2", {.mode = 0644, .atomic = true});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted,
                          AllOf(HasSubstr(addr + ".tmp."),
                                HasSubstr("No space left on device"))));
  EXPECT_EQ(Read(addr), "127.0.0.1:1");
  EXPECT_EQ(Entries(dir), 1);
  const std::string fresh = dir + "/worker1.addr";
  EXPECT_THAT(WriteFile(fresh, "127.0.0.1:3", {.atomic = true}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("No space left on device")));
  EXPECT_FALSE(Exists(fresh));
  EXPECT_THAT(WriteFile(dir + "/token", "secret\n"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("No space left on device")));
}

}  // namespace
}  // namespace ferry
