#include "tools/runtime/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

absl::StatusCode CodeOf(int error) {
  switch (error) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::StatusCode::kResourceExhausted;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case EISDIR:
    case EEXIST:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

// All of `text` to `fd`: write(2) may take less than asked.
absl::Status WriteAll(int fd, absl::string_view text, const std::string& path) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    // A write that takes nothing would loop forever: the disk is full.
    if (n <= 0) return FileError("cannot write", path, n < 0 ? errno : ENOSPC);
    text.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Writes, optionally syncs, and closes `fd` (always), the first error
// winning: a close that fails is a write that failed (NFS reports there).
absl::Status Finish(int fd, absl::string_view text, const std::string& path,
                    mode_t mode, bool sync) {
  absl::Status s;
  if (fchmod(fd, mode) != 0) s = FileError("cannot chmod", path, errno);
  if (s.ok()) s = WriteAll(fd, text, path);
  if (s.ok() && sync && fsync(fd) != 0)
    s = FileError("cannot sync", path, errno);
  // Linux closes the descriptor even when close fails: never retried.
  if (close(fd) != 0 && s.ok()) s = FileError("cannot close", path, errno);
  return s;
}

absl::Status WriteInPlace(const std::string& path, absl::string_view text,
                          mode_t mode) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
           mode);
  if (fd < 0) return FileError("cannot write", path, errno);
  return Finish(fd, text, path, mode, /*sync=*/false);
}

absl::Status WriteAtomically(const std::string& path, absl::string_view text,
                             mode_t mode) {
  std::string tmp = path + ".tmp.XXXXXX";
  // Created exclusively (O_EXCL): never through a planted symlink.
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return FileError("cannot create a temporary file", tmp, errno);
  absl::Status s = Finish(fd, text, tmp, mode, /*sync=*/true);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = FileError(absl::StrCat("cannot rename '", tmp, "' to"), path, errno);
  }
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

}  // namespace

absl::Status FileError(absl::string_view what, const std::string& path,
                       int error) {
  return absl::Status(CodeOf(error), absl::StrCat(what, " '", path,
                                                  "': ", std::strerror(error)));
}

absl::Status WriteFile(const std::string& path, absl::string_view text,
                       FileWrite how) {
  return how.atomic ? WriteAtomically(path, text, how.mode)
                    : WriteInPlace(path, text, how.mode);
}

}  // namespace ferry
