#include "rpc/caller.h"

#include <algorithm>
#include <new>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/base/status_util.h"
#include "rpc/base/trace_binary.h"
#include "rpc/chunked_message.h"
#include "rpc/shm_message.h"
#include "rpc/stream_call.h"
#include "rpc/tracing.h"
#include "rpc/wire/grpc_status.h"
#include "rpc/wire/wire_reader.h"
#include "rpc/wire/wire_writer.h"

namespace ferry {

namespace {

// The Worker service's Call method, called through the generic stub so the
// request can be written by EncodeCallRequest.
const char kCallMethod[] = "/ferry.proto.Worker/Call";

// The memory files of a streamed call to a peer on this host, from those
// lent to it: one offered for the reply always (a reply in it proves the
// peer opens this process's files), the request in one once the peer
// proved that. A file that cannot be had leaves its message to the
// frames.
void TakeFiles(const grpc::ByteBuffer& request, ShmPool* pool,
               StreamFiles* files) {
  absl::StatusOr<ShmFile> reply = pool->Take();
  if (reply.ok()) files->reply = *std::move(reply);
  if (!pool->peer_opens_files()) return;
  absl::StatusOr<ShmFile> file = pool->Take();
  if (!file.ok()) return;
  absl::StatusOr<proto::ShmRef> at =
      file->Write(request, HeadOf(request).align());
  if (!at.ok()) return;
  files->request = *std::move(file);
  files->request_at = *std::move(at);
}

// After the call: a stream that ended normally shows whether the peer
// opens the files, and that it is done with them (they are lent again);
// otherwise the peer may still write them, and they are dropped.
void ReturnFiles(bool ended_normally, ShmPool* pool, StreamFiles* files) {
  if (!ended_normally) return;
  pool->set_peer_opens_files(files->reply_in_file);
  for (std::optional<ShmFile>* f : {&files->request, &files->reply}) {
    if (f->has_value()) pool->Give(*std::move(*f));
    f->reset();
  }
}

}  // namespace

struct Caller::Pending {
  std::shared_ptr<grpc::ClientContext> context =
      std::make_shared<grpc::ClientContext>();
  proto::CallRequest request;  // The header fields (no args).
  grpc::ByteBuffer request_bytes;
  grpc::ByteBuffer response_bytes;
  Promise<Value> promise;
  WorkerInfo to;
  absl::Duration timeout;
  LazyCodec codec;
  InflightCalls::Token token = 0;
  CallMetrics* metrics = nullptr;  // Null: not counted.
  absl::Time started;              // On the real monotonic clock.
  // The calling function's cancellation, and our callback there.
  std::shared_ptr<Cancellation> parent;
  Cancellation::Id parent_id = 0;
  StreamFiles files;  // A streamed call's to a peer on this host.
};

Caller::Caller(ChannelPool* channels, Membership* membership,
               CallerIdentity self, Limits limits)
    : membership_(membership),
      self_(std::move(self)),
      limits_(std::move(limits)),
      stubs_(channels) {}

Caller::~Caller() {
  CancelAll(absl::CancelledError("caller shut down"));
  WaitIdle(absl::Seconds(5));
}

absl::Duration CallTimeout(const Clock& clock, const CallOptions& options,
                           absl::Duration default_timeout) {
  absl::Duration t = options.timeout.value_or(default_timeout);
  if (t == absl::ZeroDuration()) t = absl::InfiniteDuration();
  return std::min(t, TimeLeft(clock, options.deadline));
}

absl::StatusOr<Value> AwaitCall(const Future<Value>& call,
                                absl::Duration timeout) {
  if (timeout != absl::InfiniteDuration()) timeout += absl::Seconds(1);
  return call.Wait(timeout);
}

absl::Status CallError(const std::string& peer, const std::string& function,
                       const absl::Status& status, absl::Duration timeout) {
  if (absl::StartsWith(status.message(), absl::StrCat(peer, ": "))) {
    return status;
  }
  std::string detail(status.message());
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    detail = absl::StrCat("no reply within ",
                          absl::ToInt64Milliseconds(timeout), " ms");
  } else if (status.code() == absl::StatusCode::kUnavailable &&
             !absl::StrContains(detail, peer)) {
    detail = absl::StrCat(peer, " unreachable: ", detail);
  }
  return absl::Status(status.code(),
                      absl::StrCat(peer, ": ", function, ": ", detail));
}

Future<Value> Caller::Call(const WorkerInfo& to, const std::string& function,
                           std::vector<Value> args, absl::Duration timeout,
                           std::optional<proto::RRefHandle> create_rref,
                           std::shared_ptr<Cancellation> cancellation,
                           const TraceContext& trace, Value::Map kwargs) {
  if (auto down = membership_->DownReason(WorkerNode(to.rank))) {
    return Future<Value>::Ready(CallError(to.name, function, *down, timeout));
  }
  auto call = std::make_shared<Pending>();
  call->to = to;
  call->timeout = timeout;
  call->codec = LazyCodec(codecs_.load(), WorkerNode(to.rank));
  call->request.set_function(function);
  call->request.set_caller_node(self_.node);
  call->request.set_caller_name(self_.name);
  if (create_rref) *call->request.mutable_create_rref() = *create_rref;
  if (telemetry_.tracing) {
    const TraceContext outgoing = OutgoingTrace(trace, telemetry_.sample_new);
    if (outgoing.valid())
      call->request.set_trace_context(FormatTraceparentBinary(outgoing));
  }
  // Tensor bytes go out as slices over the tensors themselves (no copy).
  absl::StatusOr<grpc::ByteBuffer> bytes =
      EncodeCallRequest(call->request, args, &call->codec,
                        kwargs.empty() ? Value() : Value(std::move(kwargs)));
  if (!bytes.ok()) {
    call->codec.Abandon();
    return Future<Value>::Ready(
        Annotate(bytes.status(), absl::StrCat(to.name, ": ", function)));
  }
  call->request_bytes = *std::move(bytes);
  if (timeout != absl::InfiniteDuration()) {
    call->context->set_deadline(WallDeadlineIn(timeout));
  }
  if (telemetry_.metrics != nullptr) {
    call->metrics = telemetry_.metrics->ClientStarted(function);
    call->started = Clock::Real()->Now();
  }
  Future<Value> result = call->promise.future();
  call->token = inflight_.Add(WorkerNode(to.rank), call->context);
  if (cancellation != nullptr) Follow(call, std::move(cancellation));
  if (!call->codec.used()) {
    Send(call);
  } else {
    // RRefs in the arguments go out only once their owners know the forks.
    call->codec.ReadyToSend().Then(
        [this, call](const absl::StatusOr<Done>& ready) {
          if (ready.ok()) {
            Send(call);
          } else {
            Fail(call, ready.status());
          }
        });
  }
  return result;
}

void Caller::Follow(const std::shared_ptr<Pending>& call,
                    std::shared_ptr<Cancellation> cancellation) {
  // Not owning: the cancellation keeps its callbacks, and the call removes
  // its own before it completes (so `this` is alive when it runs).
  Cancellation* c = cancellation.get();
  InflightCalls::Token token = call->token;
  call->parent = std::move(cancellation);
  call->parent_id = c->OnCancel(
      [this, c, token] { inflight_.CancelOne(token, c->reason()); });
}

void Caller::Send(const std::shared_ptr<Pending>& call) {
  grpc::GenericStub* stub = stubs_.For(call->to, call->context.get());
  // Large requests as chunks into the callee's final memory
  // (rpc/stream_call.h); their replies come back the same way.
  if (call->request_bytes.Length() >= kStreamMinBytes) {
    ShmPool* files = stubs_.SharedMemory(call->to);
    if (files != nullptr) TakeFiles(call->request_bytes, files, &call->files);
    StartStreamCall(stub, call->context.get(), call->request_bytes,
                    &call->response_bytes, limits_.max_message_bytes,
                    &call->files,
                    [this, call, files](const grpc::Status& status) {
                      if (files != nullptr) {
                        ReturnFiles(status.ok(), files, &call->files);
                      }
                      Complete(call, status);
                    });
    return;
  }
  stub->UnaryCall(
      call->context.get(), kCallMethod, grpc::StubOptions(),
      &call->request_bytes, &call->response_bytes,
      [this, call](grpc::Status status) { Complete(call, status); });
}

void Caller::Fail(const std::shared_ptr<Pending>& call,
                  const absl::Status& status) {
  if (call->parent != nullptr) call->parent->Remove(call->parent_id);
  absl::Status failure = inflight_.Remove(call->token);
  call->codec.Abandon();
  call->codec.Release();
  Account(call.get(), failure.ok() ? status.code() : failure.code());
  call->promise.Set(CallError(call->to.name, call->request.function(),
                              failure.ok() ? status : failure, call->timeout));
  inflight_.Finished();
}

void Caller::Account(Pending* call, absl::StatusCode code) {
  if (call->metrics == nullptr) return;
  call->metrics->Finished(code, Clock::Real()->Now() - call->started);
  const uint64_t node = WorkerNode(call->to.rank);
  telemetry_.metrics->Sent(node,
                           call->files.request_in_file()
                               ? Metrics::Traffic::kCallShm
                               : Metrics::Traffic::kCall,
                           static_cast<int64_t>(call->request_bytes.Length()));
  if (code == absl::StatusCode::kOk) {
    telemetry_.metrics->Received(
        node,
        call->files.reply_in_file ? Metrics::Traffic::kCallShm
                                  : Metrics::Traffic::kCall,
        static_cast<int64_t>(call->response_bytes.Length()));
  }
}

absl::StatusOr<Value> Caller::DecodeReply(Pending* call) {
  try {
    return ReadCallResponse(call->response_bytes, limits_, &call->codec);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory while decoding the reply");
  }
}

void Caller::Complete(const std::shared_ptr<Pending>& call,
                      const grpc::Status& grpc_status) {
  if (!grpc_status.ok()) {
    absl::Status status = FromGrpcStatus(grpc_status);
    if (status.code() == absl::StatusCode::kCancelled) {
      // Not by this side (its own cancellations record their reason, which
      // Fail prefers): the peer's server cancelled the call, as it does
      // when it shuts down. The peer is going away, not the call's work.
      status = absl::UnavailableError(absl::StrCat(
          call->to.name, " cancelled the call (it is stopping or went away)"));
    }
    Fail(call, status);
    return;
  }
  if (call->parent != nullptr) call->parent->Remove(call->parent_id);
  absl::Status failure = inflight_.Remove(call->token);
  absl::StatusOr<Value> result = DecodeReply(call.get());
  if (!failure.ok()) {
    result = failure;
  } else if (!result.ok() &&
             result.status().code() != absl::StatusCode::kResourceExhausted) {
    // The peer sent something malformed: not the caller's input at fault.
    result = absl::InternalError(
        absl::StrCat("malformed reply: ", result.status().message()));
  }
  // Copies lent for the call are returned now, not whenever gRPC drops
  // the completion callback.
  call->codec.Release();
  Account(call.get(), result.status().code());
  if (!result.ok()) {
    call->promise.Set(CallError(call->to.name, call->request.function(),
                                result.status(), call->timeout));
  } else {
    call->promise.Set(*std::move(result));
  }
  inflight_.Finished();
}

}  // namespace ferry
