#include "rpc/call_stream_service.h"

#include <functional>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "rpc/base/status_util.h"
#include "rpc/chunked_message.h"
#include "rpc/grpc_status.h"

namespace ferry {

namespace {

// One streamed call at the server: assembles the request, hands it to the
// CallService, streams the reply back.
class ServerStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public CallResponder {
 public:
  ServerStream(CallService* calls, grpc::CallbackServerContext* context,
               std::shared_ptr<ReceiveBudget> budget)
      : calls_(calls),
        context_(context),
        request_("request", calls->limits().max_message_bytes,
                 std::move(budget)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

  void Respond(grpc::ByteBuffer* reply, const grpc::Status& status) override;
  void OnCancelled(std::function<void()> f) override;

 private:
  // Ends the stream with `status`, once (later calls do nothing).
  void FinishOnce(const grpc::Status& status);
  void FinishWith(const absl::Status& status) {
    FinishOnce(ToGrpcStatus(Annotate(status, calls_->worker_name())));
  }
  void WriteNext();

  CallService* const calls_;
  grpc::CallbackServerContext* const context_;
  ChunkAssembler request_;
  grpc::ByteBuffer in_;
  ChunkWriter reply_;

  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_cancel_ ABSL_GUARDED_BY(mu_);
};

void ServerStream::OnReadDone(bool ok) {
  if (!ok) {  // The caller half-closed early, or went away.
    FinishWith(absl::InvalidArgumentError(
        absl::StrCat(request_.Progress(), " when the stream ended")));
    return;
  }
  if (absl::Status s = request_.Add(&in_); !s.ok()) {
    FinishWith(s);
    return;
  }
  if (!request_.complete()) {
    StartRead(&in_);
    return;
  }
  grpc::ByteBuffer request = request_.Take();
  calls_->Serve(context_, request, this);
}

void ServerStream::Respond(grpc::ByteBuffer* reply,
                           const grpc::Status& status) {
  if (!status.ok()) {
    FinishOnce(status);
    return;
  }
  reply_.Reset(*reply);
  reply->Clear();
  WriteNext();
}

void ServerStream::WriteNext() {
  grpc::ByteBuffer* chunk = reply_.Next();
  if (chunk == nullptr) {
    FinishOnce(grpc::Status::OK);
  } else {
    StartWrite(chunk);
  }
}

void ServerStream::OnWriteDone(bool ok) {
  if (!ok) {  // The stream broke: the caller went away.
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED,
                            "the caller went away during the reply"));
    return;
  }
  WriteNext();
}

void ServerStream::OnCancel() {
  std::function<void()> f;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    f = std::move(on_cancel_);
  }
  if (f) f();
}

void ServerStream::OnCancelled(std::function<void()> f) {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_) {
      on_cancel_ = std::move(f);
      return;
    }
  }
  f();  // Already cancelled: now, outside the lock.
}

void ServerStream::FinishOnce(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  Finish(status);
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CallStreamService::Call(grpc::CallbackServerContext* context) {
  return new ServerStream(calls_, context, budget_);
}

}  // namespace ferry
