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
               StreamFiles* files,
               std::function<void(const grpc::Status&)> done)
      : context_(context),
        response_(response),
        reply_("reply", max_reply_bytes, nullptr, "the peer",
               ReplyReader(files)),
        done_(std::move(done)) {
    proto::StreamHead head = HeadOf(request);
    if (files != nullptr && files->reply.has_value()) {
      *head.mutable_reply_to() = files->reply->ref();
    }
    if (files != nullptr && files->request.has_value()) {
      *head.mutable_shm() = files->request_at;
      request_.Reset(head, grpc::ByteBuffer());
    } else {
      request_.Reset(head, request);
    }
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
  // A reply in a file is taken only from the file offered for it.
  static ChunkAssembler::FileReader ReplyReader(StreamFiles* files) {
    if (files == nullptr || !files->reply.has_value()) return nullptr;
    return [files](const proto::ShmRef& ref, uint64_t total, char* into) {
      absl::Status read = files->reply->Read(ref, total, into);
      files->reply_in_file = read.ok();
      return read;
    };
  }

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
                     StreamFiles* files,
                     std::function<void(const grpc::Status&)> done) {
  auto* stream = new ClientStream(context, request, response, max_reply_bytes,
                                  files, std::move(done));
  stream->Start(stub);
}

}  // namespace ferry
