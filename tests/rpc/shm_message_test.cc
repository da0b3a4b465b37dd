// Memory files between processes of one host (rpc/shm_message.h), within
// one process (it opens its own files through /proc as a peer would):
// messages round-trip aligned, files are reused and pooled within bounds,
// and every file a peer could name that is not the one meant, not a
// memory file, or shorter than the message is refused with the code the
// header promises, before anything is read from it.
#include "rpc/shm_message.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "proto/call_stream.pb.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

grpc::ByteBuffer Buffer(const std::vector<std::string>& pieces) {
  std::vector<grpc::Slice> slices;
  for (const std::string& p : pieces) slices.emplace_back(p.data(), p.size());
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 13 + 5);
  return s;
}

// A ref naming descriptor `fd` of this process with `token`.
proto::ShmRef RefTo(int fd, std::string token = std::string(16, 'x')) {
  proto::ShmRef ref;
  ref.set_pid(static_cast<uint32_t>(getpid()));
  ref.set_fd(fd);
  ref.set_token(std::move(token));
  return ref;
}

// A 64-byte aligned buffer of `n` bytes to read messages into.
struct Landing {
  explicit Landing(size_t n)
      : bytes(static_cast<char*>(std::aligned_alloc(64, n / 64 * 64 + 64))),
        size(n) {}
  ~Landing() { std::free(bytes); }
  std::string text() const { return std::string(bytes, size); }
  char* bytes;
  size_t size;
};

// Sets the size of this process's file `ref` names, as a peer could.
void Resize(const proto::ShmRef& ref, off_t size) {
  const int fd = open(absl::StrCat("/proc/self/fd/", ref.fd()).c_str(),
                      O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, size), 0);
  close(fd);
}

TEST(ShmMessageTest, AWrittenMessageIsReadIntactAndAligned) {
  const std::string big = Pattern(100000);
  const grpc::ByteBuffer message = Buffer({"abc", big, "xyz"});
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef at, file.Write(message, 3));
  // Byte 3 (where the largest piece starts) is 64-byte aligned in the file.
  EXPECT_EQ((at.offset() + 3) % 64, 0u);
  Landing in(message.Length());
  ASSERT_OK(ReadPeerFile(at, message.Length(), in.bytes));
  EXPECT_EQ(in.text(), "abc" + big + "xyz");
}

TEST(ShmMessageTest, AReplyWrittenIntoTheCallersFileIsRead) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  const std::string big = Pattern(70000);
  ASSERT_OK_AND_ASSIGN(proto::ShmRef written,
                       WritePeerFile(file.ref(), Buffer({"k", big}), 1));
  EXPECT_EQ((written.offset() + 1) % 64, 0u);
  Landing in(big.size() + 1);
  ASSERT_OK(file.Read(written, in.size, in.bytes));
  EXPECT_EQ(in.text(), "k" + big);
}

TEST(ShmMessageTest, AFileIsReusedAndNeverShrinks) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK(file.Write(Buffer({Pattern(50000)}), 0).status());
  const uint64_t grown = file.size();
  EXPECT_GE(grown, 50000u);
  ASSERT_OK_AND_ASSIGN(proto::ShmRef at, file.Write(Buffer({"small"}), 0));
  EXPECT_EQ(file.size(), grown);  // Its pages are kept for the next.
  Landing in(5);
  ASSERT_OK(ReadPeerFile(at, 5, in.bytes));
  EXPECT_EQ(in.text(), "small");
}

TEST(ShmMessageTest, AReplyNamingAnotherFileIsRefused) {
  ASSERT_OK_AND_ASSIGN(ShmFile mine, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(ShmFile other, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef written,
                       WritePeerFile(other.ref(), Buffer({"abc"}), 0));
  Landing in(3);
  EXPECT_THAT(mine.Read(written, 3, in.bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not the file offered for the reply")));
}

TEST(ShmMessageTest, AMessageLongerThanItsFileIsRefused) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef at, file.Write(Buffer({"abcdef"}), 0));
  Landing in(7);
  EXPECT_THAT(ReadPeerFile(at, 7, in.bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds 6 bytes, less than the message's 7")));
  EXPECT_THAT(file.Read(at, 7, in.bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("less than the message's 7")));
}

TEST(ShmMessageTest, AFileCutByItsPeerIsRefusedNotFaulted) {
  // A hostile peer cuts its file after naming it: the reader copies with
  // pread, which comes up short, where a mapping would fault.
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef at,
                       file.Write(Buffer({Pattern(20000)}), 0));
  Resize(at, 100);
  Landing in(20000);
  EXPECT_THAT(ReadPeerFile(at, 20000, in.bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds 100 bytes, less than the message's")));
}

TEST(ShmMessageTest, TheWrongTokenOpensNothing) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK_AND_ASSIGN(proto::ShmRef guess, file.Write(Buffer({"secret"}), 0));
  guess.set_token(std::string(16, '\x01'));
  Landing in(6);
  EXPECT_THAT(ReadPeerFile(guess, 6, in.bytes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not the file its token names")));
  EXPECT_THAT(WritePeerFile(guess, Buffer({"x"}), 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not the file its token names")));
}

TEST(ShmMessageTest, MalformedRefsAreRefusedBeforeAnyOpen) {
  ASSERT_OK_AND_ASSIGN(ShmFile file, ShmFile::Create());
  ASSERT_OK(file.Write(Buffer({"abc"}), 0).status());
  Landing in(3);
  proto::ShmRef no_pid = file.ref();
  no_pid.set_pid(0);
  proto::ShmRef negative_fd = file.ref();
  negative_fd.set_fd(-1);
  proto::ShmRef short_token = file.ref();
  short_token.set_token("abc");
  proto::ShmRef far = file.ref();
  far.set_offset(64);
  for (const proto::ShmRef& ref : {no_pid, negative_fd, short_token, far}) {
    EXPECT_THAT(ReadPeerFile(ref, 3, in.bytes),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("a memory file reference needs")))
        << ref.ShortDebugString();
  }
}

TEST(ShmMessageTest, FilesThatAreNotMemoryFilesAreRefused) {
  // A device, a pipe (whose open would block), a directory and a linked
  // regular file: none is opened for real.
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  const std::string fifo = absl::StrCat(::testing::TempDir(), "/fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int fifo_fd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  const int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const std::string path = absl::StrCat(::testing::TempDir(), "/linked");
  const int linked = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  Landing in(1);
  for (int fd : {null, pipe_fds[0], fifo_fd, dir, linked}) {
    ASSERT_GE(fd, 0);
    EXPECT_THAT(ReadPeerFile(RefTo(fd), 1, in.bytes),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a memory file")))
        << fd;
    EXPECT_THAT(WritePeerFile(RefTo(fd), Buffer({"x"}), 0),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a memory file")))
        << fd;
  }
  for (int fd : {null, pipe_fds[0], pipe_fds[1], fifo_fd, dir, linked}) {
    close(fd);
  }
  unlink(fifo.c_str());
  unlink(path.c_str());
}

TEST(ShmMessageTest, AFileThatCannotBeOpenedIsAFailedPrecondition) {
  // A descriptor this process does not have, and a process that is gone.
  Landing in(1);
  EXPECT_THAT(ReadPeerFile(RefTo(1 << 20), 1, in.bytes),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot be opened here")));
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  proto::ShmRef gone = RefTo(0);
  gone.set_pid(static_cast<uint32_t>(child));
  EXPECT_THAT(ReadPeerFile(gone, 1, in.bytes),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot be opened here")));
}

TEST(ShmMessageTest, APoolLendsItsFilesAgainAndBoundsWhatItKeeps) {
  ShmPool pool;
  ASSERT_OK_AND_ASSIGN(ShmFile first, pool.Take());
  const std::string token = first.ref().token();
  pool.Give(std::move(first));
  ASSERT_OK_AND_ASSIGN(ShmFile again, pool.Take());
  EXPECT_EQ(again.ref().token(), token);  // The same file, lent again.
  // A file larger than the pool keeps is dropped.
  Resize(again.ref(), static_cast<off_t>(ShmPool::kMaxIdleBytes + 1));
  pool.Give(std::move(again));
  ASSERT_OK_AND_ASSIGN(ShmFile fresh, pool.Take());
  EXPECT_NE(fresh.ref().token(), token);
  // At most kMaxIdle files are kept.
  std::vector<ShmFile> files;
  files.push_back(std::move(fresh));
  for (size_t i = 0; i < ShmPool::kMaxIdle; ++i) {
    ASSERT_OK_AND_ASSIGN(ShmFile f, pool.Take());
    files.push_back(std::move(f));
  }
  std::vector<std::string> given;
  for (ShmFile& f : files) {
    given.push_back(f.ref().token());
    pool.Give(std::move(f));
  }
  for (size_t i = 0; i < ShmPool::kMaxIdle; ++i) {
    ASSERT_OK_AND_ASSIGN(ShmFile f, pool.Take());
    EXPECT_NE(std::find(given.begin(), given.end(), f.ref().token()),
              given.end());
  }
  ASSERT_OK_AND_ASSIGN(ShmFile extra, pool.Take());
  EXPECT_EQ(std::find(given.begin(), given.end(), extra.ref().token()),
            given.end());
}

TEST(ShmMessageTest, AClosedPoolKeepsNothing) {
  ShmPool pool;
  ASSERT_OK_AND_ASSIGN(ShmFile idle, pool.Take());
  ASSERT_OK_AND_ASSIGN(ShmFile lent, pool.Take());
  const std::string idle_token = idle.ref().token();
  const std::string lent_token = lent.ref().token();
  pool.Give(std::move(idle));
  pool.Close();
  pool.Give(std::move(lent));  // A call that ended after the close.
  ASSERT_OK_AND_ASSIGN(ShmFile next, pool.Take());
  EXPECT_NE(next.ref().token(), idle_token);
  EXPECT_NE(next.ref().token(), lent_token);
}

}  // namespace
}  // namespace ferry
