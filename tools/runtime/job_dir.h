// The private state ferryctl keeps for the jobs it starts on this machine
// (and where ferryctl and ferry::Client find a job's token):
//
//   the job directory  (--dir, or a fresh one under $XDG_RUNTIME_DIR or the
//                      temp dir): mode 0700, owned by the user; holds the
//                      job's token (0600), the daemons' logs and the pids
//                      ferryctl spawned;
//   the job records    ($XDG_STATE_HOME/ferry/jobs, else
//                      ~/.local/state/ferry/jobs; 0700): master address →
//                      job directory, so later commands find the token
//                      without flags.
//
// Files are created with O_NOFOLLOW inside directories only the user can
// write, so another local user cannot redirect them.
#ifndef FERRY_TOOLS_RUNTIME_JOB_DIR_H_
#define FERRY_TOOLS_RUNTIME_JOB_DIR_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ferry {
namespace jobs {

// The directory for a new job: `requested` (created if missing; if it
// exists it must be a directory the user owns that group and others
// cannot write), or a fresh private one. FAILED_PRECONDITION names what is
// wrong with an existing one.
absl::StatusOr<std::string> MakeJobDir(const std::string& requested);

// Writes a fresh random token to `dir`/token (0600) and returns its path.
absl::StatusOr<std::string> WriteNewToken(const std::string& dir);

// Opens (creating or truncating) a log file in the job directory, refusing
// symlinks. Returns the descriptor.
absl::StatusOr<int> OpenLog(const std::string& path);

// Records that ferryctl spawned `pid` as rank `rank` of the job in `dir`.
absl::Status RecordDaemon(const std::string& dir, int rank, pid_t pid);
// The daemons ferryctl spawned for the job in `dir` that are still those
// processes: alive, and their command line still names this job's files
// (a recycled pid is not signalled).
std::vector<pid_t> SpawnedDaemons(const std::string& dir);
// Whether `pid`'s command line has an argument starting with `marker`.
bool CommandLineHas(pid_t pid, const std::string& marker);

// Remembers that the job at `master` lives in `dir`.
absl::Status RecordJob(const std::string& master, const std::string& dir);
// The directory of the job at `master`, if this user's ferryctl started it.
std::optional<std::string> FindJob(const std::string& master);
void ForgetJob(const std::string& master);

}  // namespace jobs
}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_JOB_DIR_H_
