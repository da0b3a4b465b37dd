// Large call messages between processes of one host through memory files
// instead of the socket (rpc/stream_call.h says when calls use them): the
// sender writes a message into a memfd with one pwrite, the receiver
// copies it out with one pread straight into the buffer its values then
// reference — two passes over the bytes where the socket takes three (the
// kernel's in, its out, the reassembly), with no per-frame work. gRPC
// stays the control plane: a stream's head names the file (proto::ShmRef)
// where its frames would otherwise follow.
//
// The files are the caller's, lent to one peer and reused call after call
// (ShmPool): a fresh file per message costs more in the kernel (allocating
// and freeing its pages) than the socket's copies. The caller writes its
// request into one and offers another for the reply; the callee reads the
// first and writes the second, and holds nothing after the call.
//
// The callee opens the caller's file as /proc/<pid>/fd/<fd>, which the
// kernel allows a process of the same user in the same pid namespace;
// where it does not, calls keep the socket (the caller learns which from
// its first large reply). Nothing a peer names is trusted:
//   - only a file named "ferry-<hex of the ref's token>" is taken, and a
//     token is 16 random bytes shown only to the peer the file is lent
//     to: a peer cannot make a worker read or write another file;
//   - the file is first held by a handle that runs no driver's open
//     (O_PATH), and must be a regular file with no links on shmem (a
//     memfd) before it is opened for real;
//   - a message is copied out into the reader's own memory before it is
//     parsed, so a file changed or cut while it is read yields garbage
//     (which the parser refuses) or a short read (refused), never a fault
//     or a value changing under its reader.
#ifndef FERRY_RPC_SHM_MESSAGE_H_
#define FERRY_RPC_SHM_MESSAGE_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/call_stream.pb.h"

namespace ferry {

// A memory file of this process that a peer on this host opens through
// its ShmRef. Move-only.
class ShmFile {
 public:
  static absl::StatusOr<ShmFile> Create();

  ShmFile(ShmFile&& other) noexcept;
  ShmFile& operator=(ShmFile&& other) noexcept;
  ~ShmFile();

  // How a peer names this file.
  const proto::ShmRef& ref() const { return ref_; }
  // The file's size (it only grows).
  uint64_t size() const;

  // Puts `message` in the file, placed so that its byte `align` (< 64) is
  // 64-byte aligned; returns the ref naming it there.
  absl::StatusOr<proto::ShmRef> Write(const grpc::ByteBuffer& message,
                                      uint32_t align);
  // Copies the `total`-byte message a peer wrote, as its reply's `ref`
  // names it, into `into`. INVALID_ARGUMENT: `ref` names another file, or
  // the file holds less than the message.
  absl::Status Read(const proto::ShmRef& ref, uint64_t total, char* into) const;

 private:
  ShmFile(int fd, proto::ShmRef ref) : fd_(fd), ref_(std::move(ref)) {}

  int fd_ = -1;
  proto::ShmRef ref_;
};

// Copies the `total`-byte message in the file of a peer on this host that
// `ref` names into `into`. INVALID_ARGUMENT when `ref` is malformed,
// names no ferry memory file (or one whose name does not match its
// token), or the file holds less than the message; FAILED_PRECONDITION
// when the file cannot be opened (another user or pid namespace, a
// process gone). Messages name pid and fd.
absl::Status ReadPeerFile(const proto::ShmRef& ref, uint64_t total, char* into);

// Writes `message` into the file of a peer on this host that `ref` names,
// placed so that its byte `align` is 64-byte aligned; returns the ref
// naming it there. Errors as ReadPeerFile's.
absl::StatusOr<proto::ShmRef> WritePeerFile(const proto::ShmRef& ref,
                                            const grpc::ByteBuffer& message,
                                            uint32_t align);

// The files lent to one peer, kept between calls so their pages are
// allocated once, and whether the peer showed it can open them.
// Thread-safe.
class ShmPool {
 public:
  // Files kept idle at most, and their bytes at most (a file given back
  // past either is dropped, its memory freed): what a pool holds between
  // calls.
  static constexpr size_t kMaxIdle = 4;
  static constexpr uint64_t kMaxIdleBytes = uint64_t{256} << 20;

  // An idle file, or a new one.
  absl::StatusOr<ShmFile> Take() ABSL_LOCKS_EXCLUDED(mu_);
  // Back after a call that ended normally (the peer is done with it); a
  // file of a call that did not is dropped instead: its peer may still
  // write it.
  void Give(ShmFile file) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the idle files, and from now on every file given back (the
  // peer is gone or replaced).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a reply came in one of the files lent: the peer opens this
  // process's files, so requests may go in them too.
  bool peer_opens_files() const {
    return peer_opens_files_.load(std::memory_order_relaxed);
  }
  void set_peer_opens_files(bool opens) {
    peer_opens_files_.store(opens, std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> peer_opens_files_{false};
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ShmFile> idle_ ABSL_GUARDED_BY(mu_);
  uint64_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_RPC_SHM_MESSAGE_H_
