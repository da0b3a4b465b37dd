#include "rpc/stream_call.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rpc/chunked_message.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

const char kStreamMethod[] = "/ferry.proto.CallStream/Call";

// One streamed call at the client.
class ClientStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ClientStream(grpc::ClientContext* context, const grpc::ByteBuffer& request,
               grpc::ByteBuffer* response, int64_t max_reply_bytes,
               std::function<void(const grpc::Status&)> done)
      : context_(context),
        response_(response),
        reply_("reply", max_reply_bytes),
        done_(std::move(done)) {
    request_.Reset(request);
  }

  void Start(grpc::GenericStub* stub) {
    stub->PrepareBidiStreamingCall(context_, kStreamMethod, grpc::StubOptions(),
                                   this);
    StartRead(&in_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // Else the stream's status tells why (OnDone).
  }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void WriteNext() {
    grpc::ByteBuffer* chunk = request_.Next();
    if (chunk == nullptr) return;
    if (request_.last()) {
      StartWriteLast(chunk, grpc::WriteOptions());
    } else {
      StartWrite(chunk);
    }
  }

  grpc::ClientContext* const context_;
  grpc::ByteBuffer* const response_;
  ChunkWriter request_;
  ChunkAssembler reply_;
  grpc::ByteBuffer in_;
  absl::Status error_;  // A malformed or oversized reply.
  std::function<void(const grpc::Status&)> done_;
};

void ClientStream::OnReadDone(bool ok) {
  if (!ok) return;  // The server finished; OnDone has its status.
  absl::Status s = reply_.Add(&in_);
  if (!s.ok()) {
    error_ = s;
    context_->TryCancel();
    return;
  }
  // One more read past the end: a server sending more is malformed.
  StartRead(&in_);
}

void ClientStream::OnDone(const grpc::Status& status) {
  grpc::Status result = status;
  if (!error_.ok()) {
    result = ToGrpcStatus(error_.code() == absl::StatusCode::kResourceExhausted
                              ? error_
                              : absl::InternalError(absl::StrCat(
                                    "malformed reply: ", error_.message())));
  } else if (status.ok() && !reply_.complete()) {
    result = grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("malformed reply: ", reply_.Progress(),
                                       " when the stream ended"));
  } else if (status.ok()) {
    *response_ = reply_.Take();
  }
  std::function<void(const grpc::Status&)> done = std::move(done_);
  delete this;
  done(result);
}

}  // namespace

void StartStreamCall(grpc::GenericStub* stub, grpc::ClientContext* context,
                     const grpc::ByteBuffer& request,
                     grpc::ByteBuffer* response, int64_t max_reply_bytes,
                     std::function<void(const grpc::Status&)> done) {
  auto* stream = new ClientStream(context, request, response, max_reply_bytes,
                                  std::move(done));
  stream->Start(stub);
}

}  // namespace ferry
