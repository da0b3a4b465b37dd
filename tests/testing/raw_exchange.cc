#include "tests/testing/raw_exchange.h"

#include <utility>
#include <vector>

#include "proto/value.pb.h"
#include "rpc/value/value_proto.h"

namespace ferry {
namespace testing {

namespace {

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void* Tag(int n) { return reinterpret_cast<void*>(static_cast<intptr_t>(n)); }

}  // namespace

std::string FrameBytes(const proto::ChunkHeader& header,
                       absl::string_view payload) {
  const std::string body = header.SerializeAsString();
  std::string out;
  AppendVarint(body.size(), &out);
  out += body;
  out.append(payload.data(), payload.size());
  return out;
}

grpc::ByteBuffer ToByteBuffer(absl::string_view bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

std::string ValueBytes(const Value& v) {
  proto::Value p;
  (void)ValueToProto(v, &p);
  return p.SerializeAsString();
}

std::string TensorPastItsEndPayload(int64_t filler, int64_t data_bytes) {
  std::string out = "\x2a";
  AppendVarint(static_cast<uint64_t>(filler), &out);
  out.append(static_cast<size_t>(filler), 'x');
  out += "\x32\x01\x1a";
  AppendVarint(static_cast<uint64_t>(data_bytes), &out);
  return out;
}

proto::ChunkHeader DataHeader(std::string op, int step, int src,
                              int64_t total) {
  proto::ChunkHeader h;
  h.set_op(std::move(op));
  h.set_step(step);
  h.set_src(src);
  h.set_total(total);
  return h;
}

proto::ChunkHeader AbortHeader(std::string op, int src, absl::StatusCode code,
                               std::string error) {
  proto::ChunkHeader h;
  h.set_op(std::move(op));
  h.set_src(src);
  h.set_kind(proto::ChunkHeader::ABORT);
  h.set_code(static_cast<int>(code));
  h.set_error(std::move(error));
  return h;
}

void Authorize(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

std::unique_ptr<RawExchangeStream> RawExchangeStream::Open(
    const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout,
    const std::string& token, const char* method) {
  std::unique_ptr<RawExchangeStream> s(new RawExchangeStream());
  s->deadline_ = absl::Now() + timeout;
  s->context_.set_deadline(absl::ToChronoTime(s->deadline_));
  Authorize(&s->context_, token);
  s->stub_ = std::make_unique<grpc::GenericStub>(channel);
  s->call_ = s->stub_->PrepareCall(&s->context_, method, &s->cq_);
  s->call_->StartCall(Tag(1));
  s->Await(Tag(1));
  return s;
}

RawExchangeStream::~RawExchangeStream() {
  if (!finished_) {
    context_.TryCancel();
    Finish();
  }
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool RawExchangeStream::Await(void* tag) {
  for (;;) {
    void* got = nullptr;
    bool ok = false;
    // A little past the deadline: gRPC completes everything by then.
    switch (cq_.AsyncNext(&got, &ok,
                          absl::ToChronoTime(deadline_ + absl::Seconds(5)))) {
      case grpc::CompletionQueue::GOT_EVENT:
        if (got == tag) return ok;
        break;  // An earlier operation's completion.
      default:
        return false;
    }
  }
}

bool RawExchangeStream::Write(absl::string_view frame) {
  if (writes_done_ || finished_) return false;
  grpc::ByteBuffer bb = ToByteBuffer(frame);
  call_->Write(bb, Tag(2));
  return Await(Tag(2));
}

bool RawExchangeStream::Read(std::string* out) {
  if (finished_) return false;
  grpc::ByteBuffer bb;
  call_->Read(&bb, Tag(5));
  if (!Await(Tag(5))) return false;
  out->clear();
  std::vector<grpc::Slice> slices;
  if (bb.Valid() && bb.Length() > 0 && bb.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      out->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  return true;
}

grpc::Status RawExchangeStream::Finish() {
  if (finished_) return status_;
  if (!writes_done_) {
    writes_done_ = true;
    call_->WritesDone(Tag(3));
    Await(Tag(3));
  }
  call_->Finish(&status_, Tag(4));
  if (!Await(Tag(4)) && status_.ok()) {
    status_ = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                           "no status from the server");
  }
  finished_ = true;
  return status_;
}

grpc::Status SendFrames(const std::shared_ptr<grpc::Channel>& channel,
                        const std::vector<std::string>& frames,
                        absl::Duration timeout, const std::string& token) {
  std::unique_ptr<RawExchangeStream> s =
      RawExchangeStream::Open(channel, timeout, token);
  for (const std::string& f : frames) {
    if (!s->Write(f)) break;
  }
  return s->Finish();
}

}  // namespace testing
}  // namespace ferry
