// Outgoing calls to workers: rpc_async over the gRPC callback API, with
// every in-flight call tracked per peer so a peer's death fails them all at
// once, with its name.
#ifndef FERRY_RPC_CALLER_H_
#define FERRY_RPC_CALLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.pb.h"
#include "rpc/base/cancellation.h"
#include "rpc/base/clock.h"
#include "rpc/base/future.h"
#include "rpc/base/limits.h"
#include "rpc/base/trace_context.h"
#include "rpc/channels.h"
#include "rpc/generic_stubs.h"
#include "rpc/inflight.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rpc/metrics.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"

namespace ferry {

// Who is calling: a worker (node = rank) or a client.
struct CallerIdentity {
  uint64_t node = 0;
  std::string name;
};

// Options of one call through an agent or client.
struct CallOptions {
  // Unset: the default timeout; 0: no timeout.
  std::optional<absl::Duration> timeout;
  // remote(): the callee keeps the result as this RRef (it is the owner;
  // the handle's fork is the caller's) and replies null.
  std::optional<proto::RRefHandle> create_rref;
  // A call made by a running function on behalf of its own call: ends
  // (CANCELLED) when that call is cancelled, and by its deadline at the
  // latest. Pass the function's CallContext::cancellation and ::deadline
  // (NestedIn(ctx) in rpc/agent.h does). The deadline is on the caller's
  // clock (its timers').
  std::shared_ptr<Cancellation> cancellation;
  absl::Time deadline = absl::InfiniteFuture();
  // The trace the call continues (its traceparent); unset: the calling
  // thread's current one, else a new trace.
  TraceContext trace;
  // Keyword arguments (for functions that take them: Python's).
  Value::Map kwargs;
};

// What a Caller tells about its calls (rpc/metrics.h, rpc/tracing.h).
struct CallerTelemetry {
  Metrics* metrics = nullptr;  // Null: not counted.
  bool tracing = true;         // Carry the trace context (in the request).
  bool sample_new = false;     // Traces it starts are sampled.
};

// The calls an RRef context makes (remote(), a call on an RRef's owner),
// as an interface: Caller makes them over gRPC; a protocol test runs them
// in-process (tests/testing/fake_owners.h).
class CallSender {
 public:
  virtual ~CallSender() = default;
  // Caller::Call's contract, with no cancellation and the calling thread's
  // trace.
  virtual Future<Value> Send(const WorkerInfo& to, const std::string& function,
                             std::vector<Value> args, Value::Map kwargs,
                             absl::Duration timeout,
                             std::optional<proto::RRefHandle> create_rref) = 0;
};

class Caller final : public CallSender {
 public:
  // Replies are decoded within `limits` (rpc/wire/wire_reader.h).
  Caller(ChannelPool* channels, Membership* membership, CallerIdentity self,
         Limits limits = Limits());
  ~Caller() override;

  Caller(const Caller&) = delete;
  Caller& operator=(const Caller&) = delete;

  // Runs `function(args…)` on `to`. `timeout` becomes the gRPC deadline
  // (absl::InfiniteDuration() = none). Errors:
  //   the function's own:  "<to>: <function>: <its message>", its code;
  //   peer gone:           UNAVAILABLE "<to>: <function>: <to> died: …";
  //   timeout:             DEADLINE_EXCEEDED "<to>: <function>: no reply within
  //   N ms";
  //   `cancellation` fired: CANCELLED with its reason.
  // The call carries `trace` (or the thread's current one; OutgoingTrace),
  // and `kwargs` as its keyword arguments.
  Future<Value> Call(
      const WorkerInfo& to, const std::string& function,
      std::vector<Value> args, absl::Duration timeout,
      std::optional<proto::RRefHandle> create_rref = std::nullopt,
      std::shared_ptr<Cancellation> cancellation = nullptr,
      const TraceContext& trace = TraceContext(), Value::Map kwargs = {});

  Future<Value> Send(const WorkerInfo& to, const std::string& function,
                     std::vector<Value> args, Value::Map kwargs,
                     absl::Duration timeout,
                     std::optional<proto::RRefHandle> create_rref) override {
    return Call(to, function, std::move(args), timeout, std::move(create_rref),
                nullptr, TraceContext(), std::move(kwargs));
  }

  // Fails every in-flight call to `node` with `reason` (cancelling it).
  void FailNode(uint64_t node, const absl::Status& reason) {
    inflight_.FailNode(node, reason);
  }
  // Cancels everything in flight (abrupt stop).
  void CancelAll(const absl::Status& reason) { inflight_.CancelAll(reason); }
  int64_t inflight() const { return inflight_.size(); }
  // Waits until no call is in flight or `timeout` passes; true if idle.
  bool WaitIdle(absl::Duration timeout) { return inflight_.WaitIdle(timeout); }

  const CallerIdentity& self() const { return self_; }

  // How RRefs in values are sent and received (null: as bare descriptors).
  // Set before calls start; must outlive them.
  void SetCodecs(CodecFactory* codecs) { codecs_.store(codecs); }
  // Set before calls start; the metrics must outlive the calls.
  void SetTelemetry(CallerTelemetry telemetry) { telemetry_ = telemetry; }

 private:
  struct Pending;

  void Send(const std::shared_ptr<Pending>& call);
  void Complete(const std::shared_ptr<Pending>& call,
                const grpc::Status& status);
  void Fail(const std::shared_ptr<Pending>& call, const absl::Status& status);
  // Counts the call's end (metrics) with `code`.
  void Account(Pending* call, absl::StatusCode code);
  absl::StatusOr<Value> DecodeReply(Pending* call);

  // Ties a call to its parent's cancellation (until it completes).
  void Follow(const std::shared_ptr<Pending>& call,
              std::shared_ptr<Cancellation> cancellation);

  Membership* const membership_;
  const CallerIdentity self_;
  const Limits limits_;
  std::atomic<CodecFactory*> codecs_{nullptr};
  CallerTelemetry telemetry_;  // Constant once calls start.
  InflightCalls inflight_;
  GenericStubs stubs_;
};

// The timeout of a call made with `options`: its own (or
// `default_timeout`; 0 = none, absl::InfiniteDuration()), cut to what is
// left until options.deadline on `clock`.
absl::Duration CallTimeout(const Clock& clock, const CallOptions& options,
                           absl::Duration default_timeout);

// The result of a call started with `timeout`. The call carries its own
// deadline (and fails when its peer dies), so this wait ends; the extra
// second it allows only guards against a lost callback.
absl::StatusOr<Value> AwaitCall(const Future<Value>& call,
                                absl::Duration timeout);

// Prefixes a transport-level failure of a call with "<peer>: <function>: "
// unless the peer already named itself (errors produced by the callee).
absl::Status CallError(const std::string& peer, const std::string& function,
                       const absl::Status& status, absl::Duration timeout);

}  // namespace ferry

#endif  // FERRY_RPC_CALLER_H_
