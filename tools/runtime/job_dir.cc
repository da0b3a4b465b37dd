#include "tools/runtime/job_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/auth/node_key.h"
#include "tools/runtime/file_write.h"

namespace ferry {
namespace jobs {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A directory that is ours alone: owned by us, not writable by group or
// others, not a symlink.
absl::Status CheckPrivateDir(const std::string& dir, absl::string_view what) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", dir, "': ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", dir, "' is not a directory (or a symlink)"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", dir, "' belongs to another user"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " '", dir, "' may be written by group or others; chmod 700 it"));
  }
  return absl::OkStatus();
}

// Creates `dir` (0700) unless it exists, then checks it is private.
absl::Status EnsurePrivateDir(const std::string& dir, absl::string_view what) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": cannot create '", dir, "': ", std::strerror(errno)));
  }
  return CheckPrivateDir(dir, what);
}

// $XDG_STATE_HOME/ferry/jobs or ~/.local/state/ferry/jobs, created private;
// nullopt if neither variable is set.
absl::StatusOr<std::string> JobsDir() {
  std::string base = Env("XDG_STATE_HOME");
  if (base.empty()) {
    std::string home = Env("HOME");
    if (home.empty()) {
      return absl::FailedPreconditionError(
          "neither XDG_STATE_HOME nor HOME is set");
    }
    base = home + "/.local/state";
    mkdir((home + "/.local").c_str(), 0700);
    mkdir(base.c_str(), 0700);
  }
  const std::string ferry = base + "/ferry";
  if (absl::Status s = EnsurePrivateDir(ferry, "state directory"); !s.ok()) {
    return s;
  }
  const std::string jobs = ferry + "/jobs";
  if (absl::Status s = EnsurePrivateDir(jobs, "state directory"); !s.ok()) {
    return s;
  }
  return jobs;
}

std::string RecordName(const std::string& master) {
  return absl::StrReplaceAll(master, {{"/", "_"}, {":", "_"}});
}

}  // namespace

absl::StatusOr<std::string> MakeJobDir(const std::string& requested) {
  if (!requested.empty()) {
    if (absl::Status s = EnsurePrivateDir(requested, "--dir"); !s.ok()) {
      return s;
    }
    return requested;
  }
  std::string parent = Env("XDG_RUNTIME_DIR");
  if (parent.empty() || CheckPrivateDir(parent, "").ok() == false) {
    parent = Env("TMPDIR").empty() ? "/tmp" : Env("TMPDIR");
  }
  std::string pattern = parent + "/ferry-job-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a job directory in '", parent,
                     "': ", std::strerror(errno), " (pass --dir)"));
  }
  return pattern;  // mkdtemp made it 0700.
}

absl::StatusOr<std::string> WriteNewToken(const std::string& dir) {
  const std::string path = dir + "/token";
  if (absl::Status s = WriteFile(path, NewSecret() + "\n"); !s.ok()) {
    return s;
  }
  return path;
}

absl::StatusOr<int> OpenLog(const std::string& path) {
  int fd = open(path.c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return FileError("cannot open log", path, errno);
  return fd;
}

absl::Status RecordDaemon(const std::string& dir, int rank, pid_t pid) {
  return WriteFile(absl::StrCat(dir, "/worker", rank, ".pid"),
                   absl::StrCat(pid, "\n"));
}

bool CommandLineHas(pid_t pid, const std::string& marker) {
  const std::string cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
    if (absl::StartsWith(arg, marker)) return true;
  }
  return false;
}

std::vector<pid_t> SpawnedDaemons(const std::string& dir) {
  std::vector<pid_t> pids;
  for (int rank = 0;; ++rank) {
    const std::string base = absl::StrCat(dir, "/worker", rank);
    if (access((base + ".pid").c_str(), F_OK) != 0) break;
    pid_t pid = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(base + ".pid")),
                          &pid) ||
        pid <= 0) {
      continue;
    }
    // Our ferryd for this rank names its address file in this directory.
    if (CommandLineHas(pid, absl::StrCat("--address_file=", base, ".addr"))) {
      pids.push_back(pid);
    }
  }
  return pids;
}

absl::Status RecordJob(const std::string& master, const std::string& dir) {
  absl::StatusOr<std::string> jobs = JobsDir();
  if (!jobs.ok()) return jobs.status();
  return WriteFile(*jobs + "/" + RecordName(master), dir + "\n");
}

std::optional<std::string> FindJob(const std::string& master) {
  absl::StatusOr<std::string> jobs = JobsDir();
  if (!jobs.ok()) return std::nullopt;
  const std::string record = *jobs + "/" + RecordName(master);
  if (access(record.c_str(), R_OK) != 0) return std::nullopt;
  std::string dir(absl::StripAsciiWhitespace(ReadFile(record)));
  if (dir.empty() || !CheckPrivateDir(dir, "job directory").ok()) {
    return std::nullopt;
  }
  return dir;
}

void ForgetJob(const std::string& master) {
  absl::StatusOr<std::string> jobs = JobsDir();
  if (jobs.ok()) unlink((*jobs + "/" + RecordName(master)).c_str());
}

}  // namespace jobs
}  // namespace ferry
