#include "rpc/shm_message.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>  // memfd_create
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/slice.h"

namespace ferry {

namespace {

constexpr size_t kTokenBytes = 16;
constexpr uint32_t kAlign = 64;

// Closes a descriptor when it goes.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  const int fd_;
};

std::string Where(const proto::ShmRef& ref) {
  return absl::StrCat("the memory file of pid ", ref.pid(), " fd ", ref.fd());
}

std::string FileName(absl::string_view token) {
  return absl::StrCat("ferry-", absl::BytesToHexString(token));
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

uint32_t OffsetFor(uint32_t align) {
  return (kAlign - align % kAlign) % kAlign;
}

// Writes `message` into `fd` at the offset that aligns its byte `align`,
// growing the file to hold it (never shrinking it: its pages are kept for
// the next message); returns that offset.
absl::StatusOr<uint32_t> WriteAligned(int fd, const grpc::ByteBuffer& message,
                                      uint32_t align, const std::string& what) {
  const uint32_t offset = OffsetFor(align);
  const uint64_t end = offset + message.Length();
  struct stat st;
  if (fstat(fd, &st) != 0) return Errno(what);
  if (static_cast<uint64_t>(st.st_size) < end &&
      ftruncate(fd, static_cast<off_t>(end)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " cannot be sized: ", std::strerror(errno)));
  }
  std::vector<grpc::Slice> slices;
  (void)message.Dump(&slices);  // Fails only on an empty message.
  uint64_t at = offset;
  for (const grpc::Slice& s : slices) {
    const char* p = reinterpret_cast<const char*>(s.begin());
    size_t left = s.size();
    while (left > 0) {
      const ssize_t n = pwrite(fd, p, left, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Errno(absl::StrCat("writing ", what));
      p += n;
      left -= static_cast<size_t>(n);
      at += static_cast<uint64_t>(n);
    }
  }
  return offset;
}

// Copies `total` bytes at `offset` of `fd` into `into`.
absl::Status ReadAll(int fd, uint64_t offset, uint64_t total, char* into,
                     const std::string& what) {
  uint64_t done = 0;
  while (done < total) {
    const ssize_t n =
        pread(fd, into + done, total - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("reading ", what));
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " holds ", offset + done,
                       " bytes, less than the message's ", offset + total));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// Checks what a peer's ref says before it is used to open anything.
absl::Status CheckRef(const proto::ShmRef& ref) {
  if (ref.pid() == 0 || ref.fd() < 0 || ref.token().size() != kTokenBytes ||
      ref.offset() >= kAlign) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(ref), ": a memory file reference needs a pid, an fd, a token of ",
        kTokenBytes, " bytes (not ", ref.token().size(),
        ") and an offset below 64 (not ", ref.offset(), ")"));
  }
  return absl::OkStatus();
}

// The file `ref` names, opened for real (`flags`) only once a handle that
// runs no driver's open (O_PATH) showed it is a memfd named for the ref's
// token: a regular file without links, on shmem.
absl::StatusOr<int> OpenPeer(const proto::ShmRef& ref, int flags) {
  if (absl::Status s = CheckRef(ref); !s.ok()) return s;
  const std::string where = Where(ref);
  Fd path(open(absl::StrCat("/proc/", ref.pid(), "/fd/", ref.fd()).c_str(),
               O_PATH | O_CLOEXEC));
  if (path.get() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " cannot be opened here: ", std::strerror(errno)));
  }
  struct stat st;
  struct statfs fs;
  if (fstat(path.get(), &st) != 0 || fstatfs(path.get(), &fs) != 0 ||
      !S_ISREG(st.st_mode) || st.st_nlink != 0 || fs.f_type != TMPFS_MAGIC) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is not a memory file"));
  }
  const std::string self = absl::StrCat("/proc/self/fd/", path.get());
  char link[128];
  const ssize_t n = readlink(self.c_str(), link, sizeof(link));
  const std::string expected =
      absl::StrCat("/memfd:", FileName(ref.token()), " (deleted)");
  if (n < 0 || absl::string_view(link, static_cast<size_t>(n)) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is not the file its token names"));
  }
  const int fd = open(self.c_str(), flags | O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " cannot be opened here: ", std::strerror(errno)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<ShmFile> ShmFile::Create() {
  std::string token(kTokenBytes, '\0');
  if (getrandom(token.data(), token.size(), 0) !=
      static_cast<ssize_t>(token.size())) {
    return Errno("drawing a memory file's token");
  }
  const int fd = memfd_create(FileName(token).c_str(), MFD_CLOEXEC);
  if (fd < 0) return Errno("creating a memory file");
  proto::ShmRef ref;
  ref.set_pid(static_cast<uint32_t>(getpid()));
  ref.set_fd(fd);
  ref.set_token(std::move(token));
  return ShmFile(fd, std::move(ref));
}

ShmFile::ShmFile(ShmFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), ref_(std::move(other.ref_)) {}

ShmFile& ShmFile::operator=(ShmFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    ref_ = std::move(other.ref_);
  }
  return *this;
}

ShmFile::~ShmFile() {
  if (fd_ >= 0) close(fd_);
}

uint64_t ShmFile::size() const {
  struct stat st;
  return fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

absl::StatusOr<proto::ShmRef> ShmFile::Write(const grpc::ByteBuffer& message,
                                             uint32_t align) {
  absl::StatusOr<uint32_t> offset =
      WriteAligned(fd_, message, align, Where(ref_));
  if (!offset.ok()) return offset.status();
  proto::ShmRef at = ref_;
  at.set_offset(*offset);
  return at;
}

absl::Status ShmFile::Read(const proto::ShmRef& ref, uint64_t total,
                           char* into) const {
  if (ref.pid() != ref_.pid() || ref.fd() != ref_.fd() ||
      ref.token() != ref_.token() || ref.offset() >= kAlign) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(ref), " is not the file offered for the reply (",
                     Where(ref_), ")"));
  }
  return ReadAll(fd_, ref.offset(), total, into, Where(ref_));
}

absl::Status ReadPeerFile(const proto::ShmRef& ref, uint64_t total,
                          char* into) {
  absl::StatusOr<int> opened = OpenPeer(ref, O_RDONLY);
  if (!opened.ok()) return opened.status();
  Fd fd(*opened);
  return ReadAll(fd.get(), ref.offset(), total, into, Where(ref));
}

absl::StatusOr<proto::ShmRef> WritePeerFile(const proto::ShmRef& ref,
                                            const grpc::ByteBuffer& message,
                                            uint32_t align) {
  absl::StatusOr<int> opened = OpenPeer(ref, O_RDWR);
  if (!opened.ok()) return opened.status();
  Fd fd(*opened);
  absl::StatusOr<uint32_t> offset =
      WriteAligned(fd.get(), message, align, Where(ref));
  if (!offset.ok()) return offset.status();
  proto::ShmRef written = ref;
  written.set_offset(*offset);
  return written;
}

absl::StatusOr<ShmFile> ShmPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      ShmFile file = std::move(idle_.back());
      idle_.pop_back();
      idle_bytes_ -= file.size();
      return file;
    }
  }
  return ShmFile::Create();
}

void ShmPool::Give(ShmFile file) {
  const uint64_t size = file.size();
  absl::MutexLock lock(&mu_);
  if (closed_ || idle_.size() >= kMaxIdle ||
      size > kMaxIdleBytes - idle_bytes_) {
    return;  // Dropped: its memory goes back now.
  }
  idle_bytes_ += size;
  idle_.push_back(std::move(file));
}

void ShmPool::Close() {
  std::vector<ShmFile> dropped;
  absl::MutexLock lock(&mu_);
  closed_ = true;
  idle_bytes_ = 0;
  dropped.swap(idle_);
}

}  // namespace ferry
