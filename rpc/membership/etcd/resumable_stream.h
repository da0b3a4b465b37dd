// The life shared by etcd's long-lived streams (a lease kept alive, a
// prefix watched): one task carried by a succession of gRPC streams. Each
// stream opens on the connection's current endpoint with its current
// token; when one breaks, the next opens after a backoff on the next
// endpoint — or at once with a renewed token, when etcd no longer took the
// old one — until the task ends, either
// - stopped by its owner (Stop(), or the client's Stop through
//   EtcdTask::Cancel): its end callback never runs; or
// - ended by what it learnt (End(): a stream's answer, or a subclass's own
//   verdict such as a lease run out): its end callback runs once, outside
//   the lock, within the gate (CallbackGate), so that after Stop() returns
//   it never runs.
// Tracked by the connection from Start() until it ended and its last
// stream is done.
//
// A subclass says what its streams are (NewStreamLocked) and what their
// answers mean (through its own stream class, which derives from
// EtcdStream and grpc's ClientBidiReactor); everything it keeps is guarded
// by this class's one mutex, mu_.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_RESUMABLE_STREAM_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_RESUMABLE_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "rpc/base/timers.h"
#include "rpc/membership/etcd/callback_gate.h"
#include "rpc/membership/etcd/etcd_connection.h"

namespace ferry {

class ResumableStream;

// Runs at most once, when the task ends by End() (not by Stop()).
using EtcdEndCallback = absl::AnyInvocable<void(const absl::Status&) &&>;

// One stream of a resumable task: what the task needs of it. A subclass is
// also the stream's gRPC reactor: it binds itself to its call in Begin()
// and calls Done() from its OnDone.
class EtcdStream {
 public:
  virtual ~EtcdStream() = default;
  EtcdStream(const EtcdStream&) = delete;
  EtcdStream& operator=(const EtcdStream&) = delete;

  grpc::ClientContext* context() const { return context_.get(); }
  int endpoint() const { return endpoint_; }
  // Ends the call; Done() follows.
  void Cancel() { context_->TryCancel(); }

  // Starts the call on `stubs`; the stream keeps itself (`self`) until it
  // is done.
  void Open(const EtcdStubs& stubs, std::shared_ptr<EtcdStream> self);

 protected:
  // `context`: from EtcdConnection::NewContext, destroyed with the stream.
  EtcdStream(std::weak_ptr<ResumableStream> task, int endpoint,
             std::shared_ptr<grpc::ClientContext> context);

  // Binds the reactor to its call on `stubs` and starts it.
  virtual void Begin(const EtcdStubs& stubs) = 0;
  // From the reactor's OnDone: tells the task, then lets go of itself (the
  // stream may be gone when it returns).
  void Done(const grpc::Status& status);

 private:
  const std::weak_ptr<ResumableStream> task_;
  const int endpoint_;
  const std::shared_ptr<grpc::ClientContext> context_;
  std::shared_ptr<EtcdStream> self_;  // Open() until Done().
};

class ResumableStream : public EtcdTask,
                        public std::enable_shared_from_this<ResumableStream> {
 public:
  ~ResumableStream() override = default;

  // Tracks the task and opens its first stream. If the client is stopping,
  // the task ends at once, silently.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the task without its end callback (EtcdTask: also what the
  // client's Stop does).
  void Cancel() override ABSL_LOCKS_EXCLUDED(mu_);
  // Cancel(), then waits (bounded) for a callback running on another
  // thread: once it returns, none runs. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // From a stream: it is done (broken, cancelled, or closed by etcd).
  void OnStreamDone(const EtcdStream* stream, const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

 protected:
  ResumableStream(std::shared_ptr<EtcdConnection> connection,
                  EtcdEndCallback on_end);

  // ---- What a subclass says ----
  // The task's stream, in errors: "Watch /job/*".
  virtual std::string StreamName() const = 0;
  // The next stream, on `endpoint` (not started yet).
  virtual std::shared_ptr<EtcdStream> NewStreamLocked(int endpoint)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // After a stream started, outside the lock.
  virtual void OnStreamOpened() {}
  // The current stream is done: forget what was kept about it.
  virtual void OnStreamGoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}
  // Whether a broken stream's `error` ends the task (another endpoint would
  // say the same) rather than a new stream being tried.
  virtual bool IsFinal(const absl::Status& /*error*/) const { return false; }
  // The task ends: cancel the subclass's timers.
  virtual void OnEndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}

  // ---- What a subclass uses ----
  // Ends the task for good with `reason` (not OK): see the file comment.
  // No-op if it had ended.
  void End(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // This task, as its subclass T, for callbacks that must not keep it.
  template <typename T>
  std::weak_ptr<T> WeakSelf() {
    return std::static_pointer_cast<T>(shared_from_this());
  }
  // Cancels `*timer` if set, and clears it.
  void CancelTimerLocked(Timers::TimerId* timer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<EtcdConnection> connection_;
  // Callbacks the subclass runs (events) pass through it too.
  CallbackGate gate_;

  mutable absl::Mutex mu_;
  std::shared_ptr<EtcdStream> stream_ ABSL_GUARDED_BY(mu_);
  // Streams broken in a row; a subclass resets it once a stream works.
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  // The last broken stream's error, or token renewal's.
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;   // Stopped, cancelled or End()ed.
  bool failed_ ABSL_GUARDED_BY(mu_) = false;  // End()ed.

 private:
  void OpenStream() ABSL_LOCKS_EXCLUDED(mu_);
  void RenewTokenThenReopen(uint64_t generation, absl::Duration pause);
  void ReopenLater(absl::Duration delay) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the task ended; returns the stream to cancel outside the lock.
  std::shared_ptr<EtcdStream> EndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeUntrack() ABSL_LOCKS_EXCLUDED(mu_);

  EtcdEndCallback on_end_ ABSL_GUARDED_BY(mu_);
  uint64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;  // Its token's.
  Timers::TimerId reopen_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool untracked_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_RESUMABLE_STREAM_H_
