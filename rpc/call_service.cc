#include "rpc/call_service.h"

#include <unistd.h>

#include <new>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/peer_text.h"
#include "rpc/base/status_util.h"
#include "rpc/wire/grpc_status.h"
#include "rpc/wire/wire_writer.h"

namespace ferry {

namespace {

// A unary reactor that tells its call of cancellation and, once done,
// that its answer left; then deletes itself.
class CallReactor final : public grpc::ServerUnaryReactor,
                          public CallResponder {
 public:
  CallReactor(grpc::CallbackServerContext* context, grpc::ByteBuffer* response)
      : context_(context), response_(response) {}

  void OnCancel() override {
    std::function<void()> f;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      f = std::move(on_cancel_);
    }
    if (f) f();
  }
  void OnDone() override {
    if (ended_) ended_();
    delete this;
  }
  // OnDone's work (giving back what the answer held) and OnCancel's are
  // quick and never block for long (Cancellation's contract): both may run
  // on the thread that completed the call. Otherwise gRPC hands each to
  // its executor, one thread hop (a wake-up and a switch) per call. (gRPC's
  // own default reactor says the same of itself; the name is gRPC's.)
  bool InternalInlineable() override { return true; }

  void Respond(grpc::ByteBuffer* reply, const grpc::Status& status,
               std::function<void()> ended) override {
    // Before Finish: OnDone may run as soon as it is called.
    ended_ = std::move(ended);
    // gRPC's response buffer: written right before Finish (after it, it
    // may be gone).
    if (status.ok()) response_->Swap(reply);
    Finish(status);
  }
  void CancelUnsent() override { context_->TryCancel(); }
  // Set while gRPC may already cancel the call (a call that waited for
  // Open()): a cancellation that came first runs `f` now.
  void OnCancelled(std::function<void()> f) override {
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        on_cancel_ = std::move(f);
        return;
      }
    }
    f();
  }

 private:
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  // Set by Respond, run by OnDone (which gRPC calls after Finish).
  std::function<void()> ended_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_cancel_ ABSL_GUARDED_BY(mu_);
};

// An answer on its way out, watched by its reply deadline: Expire cancels
// the call unless it ended first. The responder is valid only until the
// call ended, so End waits out a cancel in progress on another thread; a
// cancel may also end the call inline, on its own thread, which then must
// not wait for itself.
class ReplyWatch {
 public:
  explicit ReplyWatch(CallResponder* responder) : responder_(responder) {}

  // The deadline passed: ends the call if its answer has not left.
  void Expire() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return;
      canceller_ = std::this_thread::get_id();
    }
    responder_->CancelUnsent();
    absl::MutexLock lock(&mu_);
    canceller_.reset();
  }
  // The answer left or the call ended: Expire does nothing from now on.
  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    const std::thread::id self = std::this_thread::get_id();
    auto no_other_cancel = [this, self]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !canceller_.has_value() || *canceller_ == self;
    };
    mu_.Await(absl::Condition(&no_other_cancel));
  }

 private:
  CallResponder* const responder_;
  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  // The thread in responder_->CancelUnsent(), if one is.
  std::optional<std::thread::id> canceller_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

struct CallService::ActiveCall {
  // Used only by the call's claimer (after it responded, it may be gone).
  CallResponder* responder = nullptr;
  grpc::ByteBuffer reply;  // The encoded result, until claimed.
  std::shared_ptr<const RegisteredFunction> function;
  CallContext context;
  std::vector<Value> args;
  LazyCodec codec;
  std::optional<proto::RRefHandle> remote;  // A remote() call's RRef.
  bool remote_begun = false;
  uint64_t peer = 0;
  bool admitted = false;
  std::atomic<bool> claimed{false};
  // Charged to the caller in replies_ until the answer left.
  int64_t reply_bytes = 0;
  // Telemetry.
  CallMetrics* metrics = nullptr;
  absl::Time started;  // On the real monotonic clock.
  int64_t request_bytes = 0;
  uint64_t parent_span = 0;  // The caller's span.
};

CallService::CallService(Options options)
    : WorkerServiceBase(ServiceOf<proto::CallRequest>("Worker"), options.limits,
                        options.worker_name),
      options_(std::move(options)),
      prejoin_(
          options_.prejoin_calls != nullptr
              ? options_.prejoin_calls
              : std::make_shared<Quota>(options_.limits.max_prejoin_calls)),
      replies_(PeerBudget::Options{
          .max_bytes = options_.limits.grpc_memory_bytes,
          .max_bytes_per_peer = options_.limits.max_reply_bytes_per_peer,
          .what = "replies not yet sent",
          .peer_flag = "max_reply_mb_per_peer"}),
      open_(!options_.start_closed) {
  ReadsRaw("Call");
  Bound(&CallService::GetStatus, "GetStatus");
  Bound(&CallService::ListFunctions, "ListFunctions");
  Bound(&CallService::Shutdown, "Shutdown");
}

CallService::~CallService() {
  Abort(absl::UnavailableError(
      absl::StrCat(options_.worker_name, " is shutting down")));
}

absl::Status CallService::Prepare(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer& request,
                                  const std::shared_ptr<ActiveCall>& call) {
  FERRY_ASSIGN_OR_RETURN(CallRequestReader reader,
                         CallRequestReader::Open(request, options_.limits));
  const CallHeader& header = reader.header();
  if (options_.authenticator != nullptr) {
    // The caller's node is what its credential proves, not what it says.
    FERRY_ASSIGN_OR_RETURN(std::optional<uint64_t> caller,
                           options_.authenticator->CallerNode(*context));
    FERRY_RETURN_IF_ERROR(options_.authenticator->CheckClaim(
        caller, "caller_node", header.caller_node));
  }
  call->function = options_.registry->Find(header.function);
  // An unknown name is the caller's: echoed bounded, kept nowhere.
  call->context.function = call->function != nullptr
                               ? header.function
                               : EchoPeerText(header.function);
  StartTrace(context, header.trace, call.get());
  if (options_.metrics != nullptr) {
    // Unregistered names are the caller's to choose: not a label each.
    call->metrics = options_.metrics->ServerStarted(
        call->function != nullptr ? header.function : "(unknown)");
  }
  if (call->function == nullptr) {
    return absl::NotFoundError("no such function (see `ferryctl functions`)");
  }
  // Refused before any value is built, like an unknown name.
  if (header.kwargs && !call->function->keywords) {
    // (Answered as "<worker>: <function>: …".)
    return absl::InvalidArgumentError(
        "takes no keyword arguments (a C++ function's parameters are "
        "positional): pass them in order in args");
  }
  call->context.worker = options_.worker_name;
  call->context.caller = options_.node_label
                             ? options_.node_label(header.caller_node)
                             : IdentityLabel(header.caller_node);
  call->context.caller_node = header.caller_node;
  call->context.deadline =
      FromWallDeadline(*options_.clock, context->deadline());
  call->context.cancellation = std::make_shared<Cancellation>();
  call->context.limits = &options_.limits;
  call->peer = header.caller_node;
  call->codec = LazyCodec(options_.codecs, header.caller_node);
  // Refused before any value is built: a flood costs only the header.
  FERRY_RETURN_IF_ERROR(Admit(call));
  FERRY_RETURN_IF_ERROR(DecodeArgs(&reader, call.get()));
  if (header.create_rref) {
    if (options_.remote == nullptr) {
      return absl::UnimplementedError("this worker keeps no RRefs");
    }
    call->remote = *header.create_rref;
    FERRY_RETURN_IF_ERROR(
        options_.remote->Begin(*call->remote, header.caller_node));
    call->remote_begun = true;
  }
  return absl::OkStatus();
}

absl::Status CallService::DecodeArgs(CallRequestReader* reader,
                                     ActiveCall* call) {
  // Sizes are bounded by the limits, but the worker's memory may still run
  // out: that is the caller's to retry later, not a crash.
  try {
    Value::Map kwargs;
    FERRY_ASSIGN_OR_RETURN(call->args, reader->Args(&call->codec, &kwargs));
    if (!kwargs.empty()) {
      call->context.kwargs =
          std::make_shared<const Value::Map>(std::move(kwargs));
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory while decoding the arguments");
  }
  return absl::OkStatus();
}

absl::Status CallService::Admit(const std::shared_ptr<ActiveCall>& call) {
  const int64_t max = options_.limits.max_inflight_per_peer;
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::UnavailableError(
        absl::StrCat(options_.worker_name, " is shutting down"));
  }
  if (!open_) return TooManyWaiting(prejoin_->used());
  int64_t& count = per_peer_[call->peer];
  if (count >= max) {
    if (count == 0) per_peer_.erase(call->peer);
    return OverLimit(absl::StrCat(call->context.caller, " has ", count,
                                  " calls in flight here"),
                     absl::StrCat(max, " calls"), "max_inflight_per_peer", max);
  }
  ++count;
  call->admitted = true;
  active_.insert(call);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* CallService::Call(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto* reactor = new CallReactor(context, response);
  Serve(context, *request, reactor);
  return reactor;
}

absl::Status CallService::TooManyWaiting(int64_t waiting) const {
  const int64_t max = prejoin_->max();
  return absl::UnavailableError(absl::StrCat(
      "this worker has not joined the job yet and ", waiting,
      " calls already wait for it, ",
      LimitNote(absl::StrCat(max, " calls"), "max_prejoin_calls", max),
      "; retry"));
}

bool CallService::Park(grpc::CallbackServerContext* context,
                       const grpc::ByteBuffer& request,
                       CallResponder* responder, absl::Status* refusal) {
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    // Not accepting: Prepare refuses it.
    if (open_ || !accepting_) return false;
    // Too many waiting: the excess is refused rather than held.
    if (!prejoin_->TryTake()) {
      *refusal = TooManyWaiting(prejoin_->used());
      return false;
    }
    id = next_parked_++;
    // A shallow copy: the bytes are shared, not copied.
    parked_.emplace(id, Parked{context, request, responder});
  }
  // Outside the lock: either may answer the call at once.
  responder->OnCancelled([this, id] {
    Unpark(id, absl::CancelledError("the caller went away or its deadline "
                                    "passed while waiting for the job to "
                                    "form"));
  });
  if (options_.timers == nullptr) return true;
  const int64_t wait_ms = options_.limits.prejoin_wait_ms;
  const Timers::TimerId timer = options_.timers->RunAfter(
      absl::Milliseconds(wait_ms), [this, id, wait_ms] {
        Unpark(id, absl::UnavailableError(
                       absl::StrCat("this worker did not join the job within ",
                                    wait_ms, " ms of the call's arrival, ",
                                    LimitNote(absl::StrCat(wait_ms, " ms"),
                                              "prejoin_wait_ms", wait_ms),
                                    "; retry")));
      });
  bool kept;
  {
    absl::MutexLock lock(&mu_);
    auto it = parked_.find(id);
    kept = it != parked_.end();
    if (kept) it->second.timer = timer;
  }
  if (!kept) options_.timers->Cancel(timer);  // Answered or served already.
  return true;
}

void CallService::Unpark(uint64_t id, const absl::Status& status) {
  Parked p;
  {
    absl::MutexLock lock(&mu_);
    auto it = parked_.find(id);
    if (it == parked_.end()) return;  // Served, answered, or aborted.
    p = std::move(it->second);
    parked_.erase(it);
  }
  prejoin_->Give();
  if (p.timer != 0) options_.timers->Cancel(p.timer);
  p.responder->Respond(
      nullptr, ToGrpcStatus(Annotate(status, options_.worker_name)), nullptr);
}

std::vector<CallService::Parked> CallService::TakeParked() {
  std::vector<Parked> out;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, p] : parked_) out.push_back(std::move(p));
    parked_.clear();
  }
  for (const Parked& p : out) {
    prejoin_->Give();
    if (p.timer != 0) options_.timers->Cancel(p.timer);
  }
  return out;
}

void CallService::Open() {
  {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  for (Parked& p : TakeParked()) Serve(p.context, p.request, p.responder);
}

void CallService::Serve(grpc::CallbackServerContext* context,
                        const grpc::ByteBuffer& request,
                        CallResponder* responder) {
  absl::Status refusal;
  if (Park(context, request, responder, &refusal)) return;
  auto call = std::make_shared<ActiveCall>();
  call->responder = responder;
  call->started = Clock::Real()->Now();
  if (options_.metrics != nullptr) {
    call->request_bytes = static_cast<int64_t>(request.Length());
  }
  absl::Status prepared =
      refusal.ok() ? Prepare(context, request, call) : refusal;
  if (!prepared.ok()) {
    Refuse(call, prepared);
    return;
  }
  responder->OnCancelled([this, call] { Cancelled(call); });
  Run(std::move(call));
}

void CallService::Refuse(const std::shared_ptr<ActiveCall>& call,
                         const absl::Status& status) {
  // The RRef holds the refusal (an error: nothing kept, nothing to add).
  if (call->remote_begun) (void)options_.remote->Finish(*call->remote, status);
  call->args.clear();  // RRefs decoded before the error are released.
  call->codec.Abandon();
  if (Claim(call)) FinishClaimed(call.get(), status);
}

void CallService::Run(std::shared_ptr<ActiveCall> call) {
  auto execute = [this, call]() {
    // Cancelled while queued: already answered, nobody wants the work.
    if (call->context.IsCancelled()) return;
    // Calls the function makes on this thread continue the call's trace.
    ScopedTrace trace(call->context.trace);
    Future<Value> result =
        InvokeFunction(*call->function, call->context, std::move(call->args));
    result.Then(
        [this, call](const absl::StatusOr<Value>& r) { Answer(call, r); });
  };
  if (call->function->run_inline) {
    execute();
    return;
  }
  absl::Status queued = options_.executor->TrySubmit(execute);
  if (queued.code() == absl::StatusCode::kUnavailable) {
    queued = absl::UnavailableError(
        absl::StrCat(options_.worker_name, " is shutting down"));
  }
  if (!queued.ok()) Answer(call, queued);
}

bool CallService::Claim(const std::shared_ptr<ActiveCall>& call) {
  if (call->claimed.exchange(true)) return false;
  absl::MutexLock lock(&mu_);
  active_.erase(call);  // Its peer's slot is held until its answer left.
  return true;
}

void CallService::Leave(uint64_t peer) {
  absl::MutexLock lock(&mu_);
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
}

void CallService::FinishClaimed(ActiveCall* call, const absl::Status& status) {
  absl::Status answer = status;
  if (answer.ok()) answer = HoldReply(call);
  const std::string& fn = call->context.function;
  absl::Status named =
      answer.ok()
          ? answer
          : Annotate(answer,
                     fn.empty() ? options_.worker_name
                                : absl::StrCat(options_.worker_name, ": ", fn));
  // Before the answer leaves: a caller that has it finds the span.
  Account(call, answer);
  call->responder->Respond(&call->reply, ToGrpcStatus(named), WatchReply(call));
}

absl::Status CallService::HoldReply(ActiveCall* call) {
  // A remote() call replies an empty message (gRPC sends no buffer that
  // was never filled).
  if (!call->reply.Valid()) {
    grpc::Slice empty;
    call->reply = grpc::ByteBuffer(&empty, 1);
  }
  const int64_t bytes = static_cast<int64_t>(call->reply.Length());
  absl::Status held = replies_.Take(call->context.caller, bytes);
  if (!held.ok()) {
    call->reply.Clear();  // Never sent: its caller gets the error instead.
    call->codec.Abandon();
    return held;
  }
  call->reply_bytes = bytes;
  return absl::OkStatus();
}

std::function<void()> CallService::WatchReply(ActiveCall* call) {
  std::shared_ptr<ReplyWatch> watch;
  Timers::TimerId timer = 0;
  if (options_.timers != nullptr) {
    // Armed before Respond: the call may end before Respond returns.
    watch = std::make_shared<ReplyWatch>(call->responder);
    timer = options_.timers->RunAfter(
        absl::Milliseconds(options_.limits.reply_ttl_ms),
        [watch] { watch->Expire(); });
  }
  return [this, watch, timer, peer = call->peer, admitted = call->admitted,
          caller = call->context.caller, bytes = call->reply_bytes] {
    if (watch != nullptr) {
      watch->End();
      options_.timers->Cancel(timer);
    }
    if (bytes > 0) replies_.Give(caller, bytes);
    if (admitted) Leave(peer);
  };
}

void CallService::StartTrace(grpc::CallbackServerContext* context,
                             const std::optional<TraceContext>& sent,
                             ActiveCall* call) {
  std::optional<TraceContext> incoming;
  if (options_.tracing) {
    // A ferry caller's is in the request; another caller's in metadata.
    incoming = sent.has_value() ? sent : TraceparentOf(*context);
  }
  if (incoming.has_value()) {
    call->parent_span = incoming->span_id;
    call->context.trace = incoming->Child();
  } else {
    call->context.trace =
        NewTrace(options_.tracer != nullptr && options_.tracer->samples_new());
  }
}

void CallService::Account(ActiveCall* call, const absl::Status& status) {
  if (call->metrics == nullptr && options_.tracer == nullptr) return;
  const absl::Duration elapsed = Clock::Real()->Now() - call->started;
  if (call->metrics != nullptr) {
    call->metrics->Finished(status.code(), elapsed);
    options_.metrics->Received(call->peer, Metrics::Traffic::kCall,
                               call->request_bytes);
    if (status.ok()) {
      options_.metrics->Sent(call->peer, Metrics::Traffic::kCall,
                             static_cast<int64_t>(call->reply.Length()));
    }
  }
  if (options_.tracer != nullptr &&
      options_.tracer->Records(call->context.trace)) {
    options_.tracer->Record({.name = call->context.function,
                             .context = call->context.trace,
                             .parent_span_id = call->parent_span,
                             .start = absl::Now() - elapsed,
                             .duration = elapsed,
                             .status = StatusCodeName(status.code()),
                             .peer = call->context.caller,
                             .kind = "server"});
  }
}

absl::Status CallService::Encode(ActiveCall* call, const Value& result) {
  try {
    absl::StatusOr<grpc::ByteBuffer> bytes =
        EncodeCallResponse(result, &call->codec);
    if (!bytes.ok()) return bytes.status();
    call->reply = *std::move(bytes);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "result: out of memory while encoding the result");
  }
  return absl::OkStatus();
}

void CallService::Answer(const std::shared_ptr<ActiveCall>& call,
                         const absl::StatusOr<Value>& result) {
  served_.fetch_add(1);
  if (call->remote) {
    // The value stays here as the RRef's; the caller only learns the outcome.
    Reply(call, options_.remote->Finish(*call->remote, result));
    return;
  }
  if (call->claimed.load()) {  // Cancelled or aborted: nobody reads it.
    Reply(call, result.status());
    return;
  }
  absl::Status status = result.status();
  if (status.ok()) status = Encode(call.get(), *result);
  if (!status.ok() || !call->codec.used()) {
    Reply(call, status);
    return;
  }
  // RRefs in the result go out only once their owners know the forks.
  call->codec.ReadyToSend().Then(
      [this, call](const absl::StatusOr<Done>& ready) {
        Reply(call, ready.status());
      });
}

void CallService::Reply(const std::shared_ptr<ActiveCall>& call,
                        const absl::Status& status) {
  if (!Claim(call)) {
    call->codec.Abandon();  // Aborted or cancelled meanwhile.
    return;
  }
  if (!status.ok()) call->codec.Abandon();
  FinishClaimed(call.get(), status);
}

void CallService::Cancelled(const std::shared_ptr<ActiveCall>& call) {
  // Answered first, so the call leaves the in-flight count now; then the
  // work is told, so its waits end (their callbacks may answer too, and
  // lose the claim).
  if (Claim(call)) {
    FinishClaimed(call.get(),
                  absl::CancelledError("the caller went away or its deadline "
                                       "passed"));
  }
  call->context.cancellation->Cancel(absl::CancelledError(absl::StrCat(
      options_.worker_name, ": ", call->context.function,
      ": cancelled: the caller went away or its deadline passed")));
  if (call->remote) options_.remote->Abandon(*call->remote);
}

void CallService::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

void CallService::Abort(const absl::Status& status) {
  std::vector<std::shared_ptr<ActiveCall>> calls;
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    calls.assign(active_.begin(), active_.end());
  }
  for (Parked& p : TakeParked()) {
    p.responder->Respond(
        nullptr, ToGrpcStatus(Annotate(status, options_.worker_name)), nullptr);
  }
  for (auto& call : calls) {
    if (Claim(call)) FinishClaimed(call.get(), status);
    // The work stops waiting too (outside any lock: its callbacks run).
    call->context.cancellation->Cancel(Annotate(
        status,
        absl::StrCat(options_.worker_name, ": ", call->context.function)));
  }
}

bool CallService::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return active_.empty();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

std::vector<CallService::Executing> CallService::executing() const {
  const absl::Time now = Clock::Real()->Now();
  std::vector<Executing> out;
  absl::MutexLock lock(&mu_);
  for (const auto& call : active_) {
    out.push_back(
        {call->context.function, call->context.caller, now - call->started});
  }
  return out;
}

int64_t CallService::inflight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(active_.size());
}

grpc::ServerUnaryReactor* CallService::GetStatus(
    grpc::CallbackServerContext* context, const proto::StatusRequest*,
    proto::WorkerStatus* response) {
  auto* reactor = context->DefaultReactor();
  if (options_.fill_status) options_.fill_status(response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CallService::ListFunctions(
    grpc::CallbackServerContext* context, const proto::ListFunctionsRequest*,
    proto::ListFunctionsResponse* response) {
  auto* reactor = context->DefaultReactor();
  for (const auto& fn : options_.registry->List()) {
    proto::FunctionInfo* info = response->add_functions();
    info->set_name(fn->name);
    info->set_signature(fn->signature);
    info->set_doc(fn->doc);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CallService::Shutdown(
    grpc::CallbackServerContext* context, const proto::ShutdownRequest* request,
    proto::ShutdownResponse*) {
  auto* reactor = context->DefaultReactor();
  if (options_.authenticator != nullptr) {
    // A worker stops with the job (Shutdown's barriers), never at a
    // peer's word: only clients (ferryctl down) ask.
    absl::StatusOr<std::optional<uint64_t>> caller =
        options_.authenticator->CallerNode(*context);
    absl::Status allowed =
        caller.ok()
            ? options_.authenticator->CheckClient(
                  *caller, absl::StrCat(options_.worker_name, ": Shutdown"))
            : caller.status();
    if (!allowed.ok()) {
      reactor->Finish(ToGrpcStatus(allowed));
      return reactor;
    }
  }
  if (options_.on_shutdown_request) {
    options_.on_shutdown_request(absl::Milliseconds(request->timeout_ms()));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace ferry
