// A full disk for tests of file writes (issue 25, F11): a tiny tmpfs with
// no space left, mounted over an existing directory in a mount namespace
// of its own, so nothing outside the test ever sees it and it goes with
// the processes that use it. Needs root (CAP_SYS_ADMIN) and unshare(1);
// FullDiskAvailable() says what is missing, for GTEST_SKIP.
//
//   if (absl::Status s = FullDiskAvailable(); !s.ok()) GTEST_SKIP() << s;
//   // ferryd sees `dir` full, with one page (4 KiB) left for its log:
//   RunProcess(OnFullDisk(dir, {ferryd, "--address_file=" + dir + "/a"}, 1),
//              {}, timeout);
//   // Or this process itself (only while it has no other thread):
//   ASSERT_OK(MakeFullDiskHere(dir));
#ifndef FERRY_TESTS_TESTING_FULL_DISK_H_
#define FERRY_TESTS_TESTING_FULL_DISK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ferry {
namespace testing {

inline constexpr int kFullDiskPage = 4096;

// OK if full disks can be made here; FAILED_PRECONDITION saying why not.
absl::Status FullDiskAvailable();

// `argv` (argv[0] a path) run so that it, and what it starts, see `dir` as
// a tmpfs with `free_pages` pages of 4 KiB left (every small file takes
// one): a shell in a new mount namespace mounts and fills it, then execs
// `argv`. The directory as this process sees it is not touched.
std::vector<std::string> OnFullDisk(const std::string& dir,
                                    const std::vector<std::string>& argv,
                                    int free_pages = 0);

// Moves this process to a mount namespace of its own in which `dir` is a
// tmpfs with `free_pages` pages left. Fails (EINVAL) in a process that
// already has other threads.
absl::Status MakeFullDiskHere(const std::string& dir, int free_pages = 0);

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_FULL_DISK_H_
