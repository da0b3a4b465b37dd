#include "tests/testing/raw_client.h"

#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_callback.h"
#include "proto/rendezvous.pb.h"
#include "rpc/auth/credential.h"
#include "rpc/wire/callback_queue.h"
#include "tests/testing/await.h"

namespace ferry {
namespace testing {

namespace {

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// One call in flight: its context, buffers and completion.
struct Pending {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  absl::Notification done;
  RawReply reply;
  absl::Time start;
};

// A bidi stream that writes its messages, half-closes, and reads every
// reply until the server finishes.
class StreamCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `half_close`: once written, the stream says it sends no more.
  explicit StreamCall(const std::vector<std::string>& messages,
                      bool half_close = true)
      : half_close_(half_close) {
    for (const std::string& m : messages) out_.push_back(ToBuffer(m));
  }

  void Start(grpc::GenericStub* stub, const std::string& method) {
    start = absl::Now();
    stub->PrepareBidiStreamingCall(&context, method, grpc::StubOptions(), this);
    StartRead(&in_);
    WriteNext();
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    reply.messages.push_back(FromBuffer(in_));
    reply.bytes += reply.messages.back();
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& s) override {
    reply.status = s;
    reply.elapsed = absl::Now() - start;
    done.Notify();
  }

  grpc::ClientContext context;
  RawReply reply;
  absl::Notification done;
  absl::Notification written;  // Every message handed to the connection.
  absl::Time start;

 private:
  void WriteNext() {
    if (next_ < out_.size()) {
      StartWrite(&out_[next_++]);
    } else if (next_++ == out_.size()) {
      written.Notify();
      if (half_close_) StartWritesDone();
    }
  }

  const bool half_close_;
  std::vector<grpc::ByteBuffer> out_;
  size_t next_ = 0;
  grpc::ByteBuffer in_;
};

}  // namespace

RawClient::RawClient(const std::string& address, std::string token)
    : RawClient(address, std::move(token), grpc::InsecureChannelCredentials()) {
}

RawClient::RawClient(const std::string& address, std::string token,
                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : address_(address), token_(std::move(token)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A connection of its own, as a peer of its own has (gRPC would share
  // one among channels with equal arguments).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Callback calls on a channel of its own (rpc/wire/callback_queue.h).
  HoldGrpcCallbackQueue();
  channel_ = grpc::CreateCustomChannel(address, credentials, args);
  stub_ = std::make_unique<grpc::GenericStub>(channel_);
}

std::vector<RawReply> RawClient::UnaryMany(const std::string& method,
                                           const std::string& request, int n,
                                           absl::Duration timeout) {
  std::vector<std::unique_ptr<Pending>> calls;
  for (int i = 0; i < n; ++i) {
    auto call = std::make_unique<Pending>();
    call->request = ToBuffer(request);
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    Authorize(&call->context);
    call->start = absl::Now();
    Pending* p = call.get();
    stub_->UnaryCall(&p->context, method, grpc::StubOptions(), &p->request,
                     &p->response, [p](grpc::Status s) {
                       p->reply.status = std::move(s);
                       p->reply.elapsed = absl::Now() - p->start;
                       if (p->reply.status.ok()) {
                         p->reply.bytes = FromBuffer(p->response);
                       }
                       p->done.Notify();
                     });
    calls.push_back(std::move(call));
  }
  std::vector<RawReply> replies;
  for (auto& call : calls) {
    // The deadline ends each call; the extra time only guards a lost one.
    call->done.WaitForNotificationWithTimeout(timeout + absl::Seconds(5));
    replies.push_back(call->reply);
  }
  return replies;
}

RawReply RawClient::Unary(const std::string& method, const std::string& request,
                          absl::Duration timeout) {
  return UnaryMany(method, request, 1, timeout)[0];
}

RawReply RawClient::UnaryCancelledAfter(const std::string& method,
                                        const std::string& request,
                                        absl::Duration after) {
  Pending call;
  call.request = ToBuffer(request);
  call.context.set_deadline(
      absl::ToChronoTime(absl::Now() + after + absl::Seconds(30)));
  Authorize(&call.context);
  call.start = absl::Now();
  stub_->UnaryCall(&call.context, method, grpc::StubOptions(), &call.request,
                   &call.response, [&call](grpc::Status s) {
                     call.reply.status = std::move(s);
                     call.reply.elapsed = absl::Now() - call.start;
                     call.done.Notify();
                   });
  if (!call.done.WaitForNotificationWithTimeout(after)) {
    call.context.TryCancel();
  }
  call.done.WaitForNotificationWithTimeout(absl::Seconds(10));
  return call.reply;
}

RawReply RawClient::Stream(const std::string& method,
                           const std::vector<std::string>& messages,
                           absl::Duration timeout) {
  // On the heap: if its end were ever lost, gRPC could still use it.
  auto* call = new StreamCall(messages);
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Authorize(&call->context);
  call->Start(stub_.get(), method);
  // The deadline ends the stream; the extra time only guards a lost one.
  if (!call->done.WaitForNotificationWithTimeout(timeout + absl::Seconds(5))) {
    RawReply lost;
    lost.status = grpc::Status(grpc::StatusCode::UNKNOWN, "stream never ended");
    return lost;  // `call` is leaked: gRPC may still hold it.
  }
  RawReply reply = call->reply;
  delete call;
  return reply;
}

struct RawClient::HeldStream::Call {
  StreamCall stream;
  explicit Call(const std::vector<std::string>& messages)
      : stream(messages, /*half_close=*/false) {}
};

std::unique_ptr<RawClient::HeldStream> RawClient::Hold(
    const std::string& method, const std::vector<std::string>& messages,
    absl::Duration timeout) {
  auto* call = new HeldStream::Call(messages);
  call->stream.context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Authorize(&call->stream.context);
  call->stream.Start(stub_.get(), method);
  return std::unique_ptr<HeldStream>(new HeldStream(call));
}

bool RawClient::HeldStream::AwaitWritten(absl::Duration timeout) {
  return call_->stream.written.WaitForNotificationWithTimeout(timeout);
}

RawReply RawClient::HeldStream::Wait(absl::Duration timeout) {
  if (!call_->stream.done.WaitForNotificationWithTimeout(timeout)) {
    RawReply held;
    held.status = grpc::Status(grpc::StatusCode::UNKNOWN, "not ended");
    return held;
  }
  return call_->stream.reply;
}

RawClient::HeldStream::~HeldStream() {
  call_->stream.context.TryCancel();
  // Cancelled, it ends at once; if its end were ever lost, gRPC could
  // still use it: leaked rather than freed under gRPC.
  if (call_->stream.done.WaitForNotificationWithTimeout(absl::Seconds(10))) {
    delete call_;
  }
}

void RawClient::Authorize(grpc::ClientContext* context) const {
  if (!token_.empty())
    context->AddMetadata("authorization", "Bearer " + token_);
  if (!credential_.empty()) {
    context->AddMetadata("ferry-credential", credential_);
  }
  for (const auto& [key, value] : metadata_) context->AddMetadata(key, value);
}

absl::StatusOr<uint64_t> RawClient::Register() {
  proto::RegisterClientRequest request;
  request.set_description("raw client");
  request.set_public_key(key_->public_key());
  RawReply r = Unary(kRegisterClientMethod, request.SerializeAsString(),
                     absl::Seconds(10));
  if (!r.status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(r.status.error_code()),
                        r.status.error_message());
  }
  proto::RegisterClientResponse response;
  if (!response.ParseFromString(r.bytes)) {
    return absl::InternalError("malformed RegisterClientResponse");
  }
  node_ = response.node();
  incarnation_ = response.incarnation();
  workers_.assign(response.workers().begin(), response.workers().end());
  vouchers_.assign(response.vouchers().begin(), response.vouchers().end());
  // The worker it registered at is the one it talks to.
  credential_.clear();
  for (const proto::WorkerInfo& w : workers_) {
    if (w.address() == address_) credential_ = CredentialFor(w);
  }
  return node_;
}

std::string RawClient::CredentialFor(const proto::WorkerInfo& worker) const {
  absl::StatusOr<std::string> secret = key_->Agree(worker.public_key());
  if (!secret.ok()) return "";
  PresentedCredential c;
  c.node = node_;
  c.token =
      CallToken(*secret, {node_, key_->public_key()},
                {static_cast<uint64_t>(worker.rank()), worker.public_key()});
  if (worker.rank() >= 0 &&
      worker.rank() < static_cast<int>(vouchers_.size())) {
    c.public_key = key_->public_key();
    c.voucher = vouchers_[worker.rank()];
  }
  return FormatCredential(c);
}

proto::WorkerStatus RawClient::AwaitStatus(
    const std::function<bool(const proto::WorkerStatus&)>& done,
    absl::Duration bound) {
  proto::WorkerStatus last;
  AwaitTrue(
      [&] {
        absl::StatusOr<proto::WorkerStatus> s = Status();
        if (s.ok()) last = *s;
        return s.ok() && done(last);
      },
      bound, absl::Milliseconds(20));
  return last;
}

absl::StatusOr<std::unique_ptr<RawClient>> RawClient::Registered(
    const std::string& address, std::string token) {
  auto raw = std::make_unique<RawClient>(address, std::move(token));
  absl::StatusOr<uint64_t> node = raw->Register();
  if (!node.ok()) return node.status();
  return raw;
}

absl::StatusOr<proto::WorkerStatus> RawClient::Status() {
  RawReply r = Unary(kStatusMethod, "", absl::Seconds(5));
  if (!r.status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(r.status.error_code()),
                        r.status.error_message());
  }
  proto::WorkerStatus status;
  if (!status.ParseFromString(r.bytes)) {
    return absl::InternalError("malformed WorkerStatus");
  }
  return status;
}

namespace wire {

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Bytes(int field, absl::string_view bytes) {
  std::string out = Varint((uint64_t(field) << 3) | 2);
  out += Varint(bytes.size());
  out.append(bytes.data(), bytes.size());
  return out;
}

std::string VarintField(int field, uint64_t v) {
  return Varint(uint64_t(field) << 3) + Varint(v);
}

std::string Null() { return ""; }
std::string Int(int64_t v) { return VarintField(2, static_cast<uint64_t>(v)); }
std::string Str(absl::string_view s) { return Bytes(4, s); }

std::string List(const std::vector<std::string>& items) {
  std::string body;
  for (const std::string& item : items) body += Bytes(1, item);
  return Bytes(7, body);
}

std::string Tensor(int dtype, const std::vector<int64_t>& shape,
                   absl::string_view data) {
  std::string packed;
  for (int64_t d : shape) packed += Varint(static_cast<uint64_t>(d));
  std::string body = VarintField(1, static_cast<uint64_t>(dtype));
  if (!shape.empty()) body += Bytes(2, packed);
  if (!data.empty()) body += Bytes(3, data);
  return Bytes(6, body);
}

std::string RRef(const proto::RRefHandle& handle) {
  return Bytes(9, handle.SerializeAsString());
}

std::string StreamHead(uint64_t total, uint64_t align) {
  std::string head = VarintField(1, total);
  if (align != 0) head += VarintField(2, align);
  return Varint(head.size()) + head;
}

std::string StreamChunk(absl::string_view bytes) {
  return Varint(0) + std::string(bytes);
}

std::string CallRequest(absl::string_view function,
                        const std::vector<std::string>& args,
                        uint64_t caller_node, absl::string_view caller_name) {
  std::string out = Bytes(1, function);
  out += VarintField(3, caller_node);
  out += Bytes(4, caller_name);
  for (const std::string& arg : args) out += Bytes(2, arg);
  return out;
}

}  // namespace wire

absl::StatusOr<proto::Value> ParseResult(const std::string& response) {
  proto::CallResponse r;
  if (!r.ParseFromString(response)) {
    return absl::InternalError("malformed CallResponse");
  }
  return r.result();
}

}  // namespace testing
}  // namespace ferry
