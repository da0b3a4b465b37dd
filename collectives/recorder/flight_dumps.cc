#include "collectives/recorder/flight_dumps.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/value/json.h"

namespace ferry {

namespace {

absl::Status Unavailable(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat("flight recorder dump: cannot ",
                                             what, " ", path, ": ",
                                             std::strerror(errno)));
}

absl::Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string DumpFileName(int rank) {
  return absl::StrCat("worker", rank, ".json");
}

absl::Status WriteDumpFile(const std::string& dir, int rank,
                           const Value& dump) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("create", dir);
  }
  const std::string path = absl::StrCat(dir, "/", DumpFileName(rank));
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  if (fd < 0) return Unavailable("create", tmp);
  absl::Status written = WriteAll(fd, ToJson(dump) + "\n");
  if (::close(fd) != 0 && written.ok()) written = Unavailable("write", tmp);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return Unavailable("write", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Unavailable("rename to", path);
  }
  return absl::OkStatus();
}

FlightDumps::FlightDumps(std::string dir, int rank, Executor* executor,
                         std::function<Value(const std::string&)> make)
    : dir_(std::move(dir)),
      rank_(rank),
      executor_(executor),
      make_(std::move(make)) {}

void FlightDumps::Request(std::string reason) {
  {
    absl::MutexLock lock(&mu_);
    if (writing_) {
      again_ = std::move(reason);
      return;
    }
    writing_ = true;
  }
  absl::Status queued = executor_->TrySubmit(
      [self = shared_from_this(), reason = std::move(reason)]() mutable {
        self->WriteLoop(std::move(reason));
      });
  if (!queued.ok()) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    again_.reset();
  }
}

void FlightDumps::WriteLoop(std::string reason) {
  while (true) {
    // A dump that cannot be written is lost, not retried: the op's own
    // failure has been reported already.
    Value dump = make_(reason);
    if (!dump.is_null()) WriteDumpFile(dir_, rank_, dump).IgnoreError();
    absl::MutexLock lock(&mu_);
    if (!again_.has_value()) {
      writing_ = false;
      return;
    }
    reason = *std::move(again_);
    again_.reset();
  }
}

}  // namespace ferry
