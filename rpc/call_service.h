// The server side of the Worker service: runs registered functions for
// callers, answers status and function listings, and accepts shutdown
// requests.
//
// A call is decoded on the gRPC thread, run on the executor (or inline for
// functions registered run_inline), and answered when its future resolves,
// holding no thread while it waits. Every call is answered exactly once:
// by its result, or by Abort() when the worker stops.
#ifndef FERRY_RPC_CALL_SERVICE_H_
#define FERRY_RPC_CALL_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/base/executor.h"
#include "rpc/registry.h"
#include "rpc/value/value_proto.h"

namespace ferry {

// Keeps the results of remote() calls: the callee of such a call becomes
// the owner of the RRef named in the request (the rref/ layer implements
// this with its owner table).
class RemoteHandler {
 public:
  virtual ~RemoteHandler() = default;
  // Before the function runs: the RRef exists (pending) from now on, with
  // the caller's fork. An error refuses the call.
  virtual absl::Status Begin(const proto::RRefHandle& rref,
                             uint64_t caller) = 0;
  // The function's result (or error) becomes the RRef's.
  virtual void Finish(const proto::RRefHandle& rref,
                      absl::StatusOr<Value> result) = 0;
  // The caller gave up (timeout, cancel, death): its fork is dropped, so a
  // value produced later is freed.
  virtual void Abandon(const proto::RRefHandle& rref) = 0;
};

class CallService final : public proto::Worker::CallbackService {
 public:
  struct Options {
    std::string worker_name;
    Registry* registry = nullptr;
    Executor* executor = nullptr;
    CodecFactory* codecs = nullptr;   // Optional: RRefs in values.
    RemoteHandler* remote = nullptr;  // Optional: remote() calls.
    std::function<void(proto::WorkerStatus*)> fill_status;
    std::function<void(absl::Duration timeout)> on_shutdown_request;
  };

  explicit CallService(Options options);
  ~CallService() override;

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* context,
                                 const proto::CallRequest* request,
                                 proto::CallResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const proto::StatusRequest* request,
                                      proto::WorkerStatus* response) override;
  grpc::ServerUnaryReactor* ListFunctions(
      grpc::CallbackServerContext* context,
      const proto::ListFunctionsRequest* request,
      proto::ListFunctionsResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(
      grpc::CallbackServerContext* context,
      const proto::ShutdownRequest* request,
      proto::ShutdownResponse* response) override;

  // New calls are refused with UNAVAILABLE from now on.
  void StopAccepting() ABSL_LOCKS_EXCLUDED(mu_);
  // Answers every unfinished call with `status` (before server shutdown,
  // so gRPC never waits on a call whose function does not return).
  void Abort(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // True once no call is executing, or false at `deadline`.
  bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t inflight() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t served() const { return served_.load(); }

 private:
  struct ActiveCall;

  // Decodes the request into `call`; the error answers the call.
  absl::Status Prepare(grpc::CallbackServerContext* context,
                       const proto::CallRequest* request, ActiveCall* call);
  void Run(std::shared_ptr<ActiveCall> call);
  void Answer(const std::shared_ptr<ActiveCall>& call,
              const absl::StatusOr<Value>& result) ABSL_LOCKS_EXCLUDED(mu_);
  void Reply(const std::shared_ptr<ActiveCall>& call,
             const absl::Status& status);
  // Claims `call` (exactly one claimer wins) and drops it from active_.
  bool Claim(const std::shared_ptr<ActiveCall>& call) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  std::atomic<int64_t> served_{0};

  mutable absl::Mutex mu_;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  absl::flat_hash_set<std::shared_ptr<ActiveCall>> active_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_CALL_SERVICE_H_
