#include "tests/testing/full_disk.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {

namespace {

constexpr char kUnshare[] = "/usr/bin/unshare";

std::string Size(int free_pages) {
  // Private, like the job directories made on it.
  return absl::StrCat("mode=0700,size=", (free_pages + 1) * kFullDiskPage);
}

absl::Status Errno(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::Status FullDiskAvailable() {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "a full disk needs root (to mount a tmpfs in a mount namespace)");
  }
  if (access(kUnshare, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("a full disk needs ", kUnshare, " (util-linux)"));
  }
  absl::StatusOr<ProcessResult> probe =
      RunProcess({kUnshare, "--mount", "--propagation", "private", "/bin/true"},
                 {}, absl::Seconds(10));
  if (!probe.ok()) return probe.status();
  if (probe->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot make a mount namespace here: ", probe->Describe()));
  }
  return absl::OkStatus();
}

std::vector<std::string> OnFullDisk(const std::string& dir,
                                    const std::vector<std::string>& argv,
                                    int free_pages) {
  // $0 is the directory; the filler takes the one page beyond free_pages.
  std::vector<std::string> out = {
      kUnshare,
      "--mount",
      "--propagation",
      "private",
      "--",
      "/bin/sh",
      "-c",
      absl::StrCat("mount -t tmpfs -o ", Size(free_pages),
                   " ferry-full-disk \"$0\" && head -c ", kFullDiskPage,
                   " /dev/zero > \"$0/.fill\" && exec \"$@\""),
      dir};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

absl::Status MakeFullDiskHere(const std::string& dir, int free_pages) {
  if (unshare(CLONE_NEWNS) != 0) return Errno("unshare(CLONE_NEWNS)");
  // Nothing mounted here propagates back to the parent namespace.
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Errno("making / private");
  }
  const std::string size = Size(free_pages);
  if (mount("ferry-full-disk", dir.c_str(), "tmpfs", 0, size.c_str()) != 0) {
    return Errno(absl::StrCat("mounting a tmpfs on ", dir));
  }
  const std::string fill = dir + "/.fill";
  const int fd = open(fill.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return Errno(fill);
  char page[kFullDiskPage] = {};
  const bool filled = write(fd, page, sizeof(page)) == sizeof(page);
  close(fd);
  if (!filled) return Errno(absl::StrCat("filling ", fill));
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace ferry
