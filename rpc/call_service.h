// The server side of the Worker service: runs registered functions for
// callers, answers status and function listings, and accepts shutdown
// requests.
//
// A call is decoded on the gRPC thread straight from the received bytes
// (rpc/wire/wire_reader.h, within the worker's Limits), run on the executor (or
// inline for functions registered run_inline), and answered when its
// future resolves, holding no thread while it waits. Every call is answered
// exactly once: by its result, by its cancellation (the caller went away
// or its deadline passed: CANCELLED, and the function's
// CallContext::cancellation fires so its waits end), or by Abort() when
// the worker stops. Whoever answers first removes the call from the
// in-flight count at once; a result produced later is dropped.
//
// A worker serves calls once it has joined the job (Open()): it needs the
// directory to read the RRefs in arguments. Calls that arrive earlier (a
// peer or client that saw the job form a moment before this worker did)
// wait, holding no thread: at most --max_prejoin_calls at once (counted
// with the authenticator's waits for the job's credentials), each at most
// --prejoin_wait_ms; past either the call is answered UNAVAILABLE naming
// the flag (retry: the job is forming). A waiting call whose caller goes
// away leaves at once; Abort() answers the others.
//
// Who calls is the node its credential proves (caller_node, checked): its
// name in errors, stacks and spans comes from that node (Options::
// node_label), never from the request. An unknown function's name is
// echoed bounded and escaped (rpc/base/peer_text.h).
//
// Admission: a caller (by the node its requests name) may have at most
// --max_inflight_per_peer calls here: executing, queued, or answered with
// a reply not yet written to its connection (a call counts against its
// caller until then, not until it is answered); beyond that, and beyond
// --max_queued_tasks waiting for the executor, RESOURCE_EXHAUSTED naming
// the flag.
//
// Replies on their way out are held to what their callers read: a
// reply's bytes are charged to its caller (PeerBudget, rpc/peer_budget.h)
// from its answer until it was written or its call ended, at most
// --max_reply_mb_per_peer for one caller and --grpc_memory_mb for all
// (past either the call is answered RESOURCE_EXHAUSTED naming the caller
// and the flag instead); and a reply that has not left --reply_ttl_ms
// after its answer (a caller that grants no flow-control window, or stopped
// reading) has its call cancelled, which frees it.
#ifndef FERRY_RPC_CALL_SERVICE_H_
#define FERRY_RPC_CALL_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/clock.h"
#include "rpc/base/executor.h"
#include "rpc/base/limits.h"
#include "rpc/base/quota.h"
#include "rpc/base/timers.h"
#include "rpc/metrics.h"
#include "rpc/peer_budget.h"
#include "rpc/registry.h"
#include "rpc/tracing.h"
#include "rpc/value/value_proto.h"
#include "rpc/wire/bounded_service.h"
#include "rpc/wire/wire_reader.h"

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
  // The function's result (or error) becomes the RRef's. Returns what the
  // call answers: the result's status, or why its value was not kept
  // (RESOURCE_EXHAUSTED: over its caller's budget for RRef values).
  virtual absl::Status Finish(const proto::RRefHandle& rref,
                              absl::StatusOr<Value> result) = 0;
  // The caller gave up (timeout, cancel, death): its fork is dropped, so a
  // value produced later is freed.
  virtual void Abandon(const proto::RRefHandle& rref) = 0;
};

// How a call is answered: by a unary reactor, or by a stream
// (rpc/stream_call.h).
class CallResponder {
 public:
  virtual ~CallResponder() = default;
  // Answers with `*reply` (status OK; it may be taken) or with `status`.
  // Called once. `ended` (if set) runs once, when the answer has been
  // written to the caller's connection or the call ended without it
  // (cancelled, its connection broke): until then the answer holds what
  // it holds. It may run before Respond returns; after it, the responder
  // may be gone.
  virtual void Respond(grpc::ByteBuffer* reply, const grpc::Status& status,
                       std::function<void()> ended) = 0;
  // Ends an answered call whose answer has not left yet (its caller stopped
  // reading): the call ends cancelled, and `ended` runs (perhaps before
  // this returns). Only between Respond and `ended`.
  virtual void CancelUnsent() = 0;
  // `f` runs when the call is cancelled (at once if it already was).
  virtual void OnCancelled(std::function<void()> f) = 0;
};

// The Worker service with Call taking raw bytes (read by the limit-checked
// CallRequestReader), the others parsed through BoundedParse.
using WorkerServiceBase =
    BoundedService<proto::Worker::WithRawCallbackMethod_Call<
        proto::Worker::WithCallbackMethod_GetStatus<
            proto::Worker::WithCallbackMethod_ListFunctions<
                proto::Worker::WithCallbackMethod_Shutdown<
                    proto::Worker::Service>>>>>;

class CallService final : public WorkerServiceBase {
 public:
  struct Options {
    std::string worker_name;
    Limits limits;
    Registry* registry = nullptr;
    Executor* executor = nullptr;
    CodecFactory* codecs = nullptr;   // Optional: RRefs in values.
    RemoteHandler* remote = nullptr;  // Optional: remote() calls.
    std::function<void(proto::WorkerStatus*)> fill_status;
    std::function<void(absl::Duration timeout)> on_shutdown_request;
    // The worker's clock: CallContext::deadline is on it.
    Clock* clock = Clock::Real();
    // Optional: who a call is (its credential). Then caller_node must be
    // the caller's own node, and Shutdown is for clients only.
    const Authenticator* authenticator = nullptr;
    // Calls wait for Open() (else they are served from the start).
    bool start_closed = false;
    // Calls waiting for Open() at once (--max_prejoin_calls), shared with
    // the authenticator's; null: a count of the service's own, bounded by
    // limits.max_prejoin_calls.
    std::shared_ptr<Quota> prejoin_calls;
    // A call waiting for Open() is answered UNAVAILABLE after
    // limits.prejoin_wait_ms on these, and a reply not written within
    // limits.reply_ttl_ms has its call cancelled; null: neither (a call
    // waits for Open() only, a reply as long as its caller takes).
    Timers* timers = nullptr;
    // Optional: calls counted (rpc/metrics.h) and spans recorded
    // (rpc/tracing.h); both must outlive the service.
    Metrics* metrics = nullptr;
    Tracer* tracer = nullptr;
    // Read the caller's traceparent (else every call starts a trace).
    bool tracing = true;
    // The name of node `node` (a caller's caller_node, as its credential
    // proved it): how a call's caller appears in errors, `ferryctl stacks`,
    // spans and CallContext::caller. Never what the request says its
    // caller is called (caller_name is not read). Null: IdentityLabel.
    std::function<std::string(uint64_t node)> node_label;
  };

  explicit CallService(Options options);
  ~CallService() override;

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
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

  // Serves one call whose CallRequest bytes are `request`, answered through
  // `responder` (valid until it has responded): what Call() does for a
  // unary call, and CallStreamService for a streamed one.
  void Serve(grpc::CallbackServerContext* context,
             const grpc::ByteBuffer& request, CallResponder* responder);

  const std::string& worker_name() const { return options_.worker_name; }
  // Replies answered but not yet written, by caller.
  const PeerBudget& replies() const { return replies_; }
  const Limits& limits() const { return options_.limits; }
  // Who calls are (null: claims are not checked).
  const Authenticator* authenticator() const { return options_.authenticator; }

  // Calls are served from now on: those that waited run now.
  void Open() ABSL_LOCKS_EXCLUDED(mu_);
  // New calls are refused with UNAVAILABLE from now on.
  void StopAccepting() ABSL_LOCKS_EXCLUDED(mu_);
  // Answers every unfinished call with `status` (before server shutdown,
  // so gRPC never waits on a call whose function does not return).
  void Abort(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // True once no call is executing, or false after `timeout`.
  bool WaitIdle(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t inflight() const ABSL_LOCKS_EXCLUDED(mu_);
  // The calls executing (or queued) here now: for `ferryctl stacks`.
  struct Executing {
    std::string function;
    std::string caller;
    absl::Duration running;
  };
  std::vector<Executing> executing() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t served() const { return served_.load(); }

 private:
  struct ActiveCall;
  // A call that arrived before Open().
  struct Parked {
    grpc::CallbackServerContext* context = nullptr;
    grpc::ByteBuffer request;
    CallResponder* responder = nullptr;
    Timers::TimerId timer = 0;  // Its --prejoin_wait_ms, if any.
  };

  // Keeps the call for Open() if the service is not open yet (true);
  // false if it may be served now, or must be refused: then `*refusal`
  // says why (too many wait already), or Prepare will.
  bool Park(grpc::CallbackServerContext* context,
            const grpc::ByteBuffer& request, CallResponder* responder,
            absl::Status* refusal) ABSL_LOCKS_EXCLUDED(mu_);
  // Answers parked call `id` with `status`, if it still waits.
  void Unpark(uint64_t id, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // Every parked call, in arrival order, removed (their timers cancelled
  // and their places given back).
  std::vector<Parked> TakeParked() ABSL_LOCKS_EXCLUDED(mu_);
  // UNAVAILABLE: `waiting` calls already wait for Open().
  absl::Status TooManyWaiting(int64_t waiting) const;

  // Reads and admits the request into `call`; the error answers the call.
  absl::Status Prepare(grpc::CallbackServerContext* context,
                       const grpc::ByteBuffer& request,
                       const std::shared_ptr<ActiveCall>& call);
  // The arguments, decoded; out of memory is RESOURCE_EXHAUSTED.
  absl::Status DecodeArgs(CallRequestReader* reader, ActiveCall* call);
  // Counts `call` in flight (its peer's count too) unless over a limit.
  absl::Status Admit(const std::shared_ptr<ActiveCall>& call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Answers a call that never ran with `status`.
  void Refuse(const std::shared_ptr<ActiveCall>& call,
              const absl::Status& status);
  void Run(std::shared_ptr<ActiveCall> call);
  void Answer(const std::shared_ptr<ActiveCall>& call,
              const absl::StatusOr<Value>& result) ABSL_LOCKS_EXCLUDED(mu_);
  // The result's wire bytes into call->reply; out of memory is
  // RESOURCE_EXHAUSTED.
  absl::Status Encode(ActiveCall* call, const Value& result);
  void Reply(const std::shared_ptr<ActiveCall>& call,
             const absl::Status& status);
  // The caller went away or the deadline passed (gRPC's OnCancel).
  void Cancelled(const std::shared_ptr<ActiveCall>& call);
  // Claims `call` (exactly one claimer wins) and drops it from active_.
  bool Claim(const std::shared_ptr<ActiveCall>& call) ABSL_LOCKS_EXCLUDED(mu_);
  // Finishes a claimed call with `status`, naming worker and function.
  void FinishClaimed(ActiveCall* call, const absl::Status& status);
  // Charges an OK answer's reply bytes to its caller until it leaves;
  // RESOURCE_EXHAUSTED (and the reply dropped) past its share.
  absl::Status HoldReply(ActiveCall* call);
  // What runs when `call`'s answer left or its call ended: its reply
  // bytes and its caller's slot given back. Arms the call's reply
  // deadline (--reply_ttl_ms), which that run disarms.
  std::function<void()> WatchReply(ActiveCall* call);
  // A call of `peer` admitted here ended.
  void Leave(uint64_t peer) ABSL_LOCKS_EXCLUDED(mu_);
  // The call's trace: the caller's (`sent` in the request, else a
  // traceparent in the call's metadata) continued, or a new one.
  void StartTrace(grpc::CallbackServerContext* context,
                  const std::optional<TraceContext>& sent, ActiveCall* call);
  // Counts the call's end and records its span (metrics, tracer).
  void Account(ActiveCall* call, const absl::Status& status);

  const Options options_;
  // Places for calls waiting for Open() (options_.prejoin_calls or ours).
  const std::shared_ptr<Quota> prejoin_;
  PeerBudget replies_;
  std::atomic<int64_t> served_{0};

  mutable absl::Mutex mu_;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool open_ ABSL_GUARDED_BY(mu_);
  // By arrival (ids count up), so Open() serves them in order.
  std::map<uint64_t, Parked> parked_ ABSL_GUARDED_BY(mu_);
  uint64_t next_parked_ ABSL_GUARDED_BY(mu_) = 1;
  // Calls not answered yet (executing or queued).
  absl::flat_hash_set<std::shared_ptr<ActiveCall>> active_ ABSL_GUARDED_BY(mu_);
  // Admitted calls by the node that made them, until their answers left.
  absl::flat_hash_map<uint64_t, int64_t> per_peer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_CALL_SERVICE_H_
