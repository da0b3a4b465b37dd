// Writing a small file whole (a token, an address, a record), every step
// checked: each write(2) (a short one is continued), fsync(2) for a file
// others wait for, close(2), and the rename that puts it in place. A full
// disk, a read-only file system or a missing directory is an error naming
// the file and the OS's reason ("No space left on device"), never a file
// left empty or cut short where a reader expects it.
//
//   FERRY_RETURN_IF_ERROR(WriteFile(dir + "/token", token + "\n"));
//   FERRY_RETURN_IF_ERROR(
//       WriteFile(address_file, address, {.mode = 0644, .atomic = true}));
//
// Every file ferryd, ferryctl and the job directory (job_dir.h) write goes
// through here.
#ifndef FERRY_TOOLS_RUNTIME_FILE_WRITE_H_
#define FERRY_TOOLS_RUNTIME_FILE_WRITE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

struct FileWrite {
  mode_t mode = 0600;
  // Written to a fresh temporary file beside `path`, synced, then renamed
  // over it: a reader (ferryctl waiting for a daemon's address) sees no
  // file, or the old one, or all of the new one. Without it the file is
  // created or truncated in place, never through a symlink at `path`.
  bool atomic = false;
};

// Writes `text` as the whole of file `path`. Errors name the step, the
// file and strerror's reason, with a code by what the caller can do:
//   no space or quota left (ENOSPC, EDQUOT, EFBIG)       RESOURCE_EXHAUSTED
//   not allowed (EACCES, EPERM, EROFS)                   PERMISSION_DENIED
//   a missing directory, a symlink, a directory at
//   `path` (ENOENT, ENOTDIR, ELOOP, EISDIR, EEXIST)      FAILED_PRECONDITION
//   anything else (EIO, ...)                             UNAVAILABLE
// On error nothing is left at a temporary path (`atomic`); without
// `atomic` the file may be left partly written.
absl::Status WriteFile(const std::string& path, absl::string_view text,
                       FileWrite how = {});

// "<what> '<path>': <strerror(error)>" with the code above, for the other
// file operations of the same callers (open, mkdir).
absl::Status FileError(absl::string_view what, const std::string& path,
                       int error);

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_FILE_WRITE_H_
