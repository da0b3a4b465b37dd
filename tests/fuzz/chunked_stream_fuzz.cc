// Fuzz target: requests arriving as framed streams (rpc/chunked_message.h,
// rpc/wire/frames.h) into ChunkAssemblers that share one PeerBudget, as
// hostile peers could send them: several streams of several peers at once,
// heads of any total and alignment, frames of any bytes (payload past the
// announced length too), streams abandoned half-way, whole messages taken
// and kept.
//
// Input: records, each a control byte and its operands.
//   control & 3 == 0  stream s = (control >> 2) & 7 gets a first frame: a
//                     StreamHead of u32le total and a byte of align
//                     (values >= 64 included), no payload; with bit 5,
//                     the head also names a memory file (fd: one more
//                     byte) holding the message
//   control & 3 == 1  stream s gets a frame: u16le length, then the bytes
//                     (cut into two slices at a split byte); with bit 5,
//                     the bytes are a later frame's payload (the empty
//                     head put before them), else the whole frame as is
//   control & 3 == 2  stream s is abandoned (its assembler destroyed)
//   control & 3 == 3  stream s's message is taken if complete, and kept
//                     (or, with bit 5, the kept messages are dropped)
// Stream s belongs to peer s % 3; the budget holds 192 KiB in all, 96 KiB
// per peer; messages are at most 128 KiB. Odd streams take messages in
// files (a stand-in reader: fd % 3 == 0 refuses, else the file holds
// `total` bytes of the fd's low byte); even ones take none.
//
// Properties: no crash (ASan, UBSan: every payload lands inside its
// buffer); a head reserves nothing, a second head is refused, and a stream
// holds at most twice what arrived (plus alignment); the budget counts
// exactly what the live assemblers and kept messages hold, per peer and in
// all, never past its bounds; a taken message is exactly the payload sent,
// its largest piece placed as the head said; and once everything is
// dropped, nothing is held. A file is taken only by a stream that takes
// files, whole and at once.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/call_stream.pb.h"
#include "rpc/chunked_message.h"
#include "rpc/peer_budget.h"
#include "rpc/wire/frames.h"

namespace ferry {
namespace {

constexpr int kStreams = 8;
constexpr int kPeers = 3;
constexpr int64_t kMaxMessage = 128 << 10;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(at_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void Fail(const char* what) {
  fprintf(stderr, "chunked_stream_fuzz: %s\n", what);
  abort();
}

grpc::ByteBuffer TwoSlices(const std::string& bytes, uint8_t split) {
  const size_t cut = bytes.size() * split / 256;
  grpc::Slice parts[2] = {grpc::Slice(bytes.data(), cut),
                          grpc::Slice(bytes.data() + cut, bytes.size() - cut)};
  return grpc::ByteBuffer(parts, 2);
}

std::string Flat(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!b.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

std::string PeerOf(int s) { return absl::StrCat("peer", s % kPeers); }

struct Stream {
  std::unique_ptr<ChunkAssembler> in;
  std::string sent;  // The bytes it accepted, in order.
  uint64_t align = 0;
};

class Run {
 public:
  Run()
      : budget_(std::make_shared<PeerBudget>(PeerBudget::Options{
            .max_bytes = 192 << 10, .max_bytes_per_peer = 96 << 10})) {}

  void Step(Reader& in) {
    const uint8_t control = in.Byte();
    const int s = (control >> 2) & (kStreams - 1);
    switch (control & 3) {
      case 0:
        Head(s, control, in);
        break;
      case 1:
        SendFrame(s, control, in);
        break;
      case 2:
        streams_[s] = Stream();
        break;
      default:
        if ((control & 0x20) != 0) {
          kept_.clear();
        } else {
          Take(s);
        }
    }
    Check();
  }

  void Finish() {
    for (Stream& s : streams_) s = Stream();
    kept_.clear();
    if (budget_->used() != 0 || budget_->peers() != 0) {
      Fail("bytes still held at the end");
    }
  }

 private:
  ChunkAssembler& Assembler(int s) {
    if (streams_[s].in == nullptr) {
      ChunkAssembler::FileReader files = nullptr;
      if (s % 2 == 1) files = StandInFiles;
      streams_[s].in = std::make_unique<ChunkAssembler>(
          "request", kMaxMessage, budget_, PeerOf(s), std::move(files));
      streams_[s].sent.clear();
    }
    return *streams_[s].in;
  }

  static absl::Status StandInFiles(const proto::ShmRef& ref, uint64_t total,
                                   char* into) {
    if (ref.fd() % 3 == 0) return absl::InvalidArgumentError("refused");
    std::memset(into, ref.fd() & 0xff, total);
    return absl::OkStatus();
  }

  void Head(int s, uint8_t control, Reader& in) {
    uint32_t total = 0;
    for (int i = 0; i < 4; ++i) total |= uint32_t{in.Byte()} << (8 * i);
    proto::StreamHead head;
    head.set_total(total);
    head.set_align(in.Byte());
    const bool in_file = (control & 0x20) != 0;
    if (in_file) head.mutable_shm()->set_fd(in.Byte());
    const std::string bytes = head.SerializeAsString();
    const std::string frame =
        std::string(1, static_cast<char>(bytes.size())) + bytes;
    ChunkAssembler& a = Assembler(s);
    const bool was_started = a.started();
    const int64_t before = budget_->used();
    grpc::Slice slice(frame.data(), frame.size());
    grpc::ByteBuffer b(&slice, 1);
    absl::Status added = a.Add(&b);
    if (!was_started && !in_file && budget_->used() != before) {
      Fail("a head reserved bytes");
    }
    if (was_started && added.ok()) Fail("a second head was taken");
    if (!added.ok()) {
      streams_[s] = Stream();  // The reactor finishes the stream.
      return;
    }
    streams_[s].align = head.align();
    if (in_file) {
      if (s % 2 == 0) Fail("a file taken by a stream that takes none");
      if (!a.complete()) Fail("a message in a file taken only in part");
      streams_[s].sent = std::string(total, static_cast<char>(head.shm().fd()));
    }
  }

  void SendFrame(int s, uint8_t control, Reader& in) {
    const size_t low = in.Byte();  // In order: operands' order is unspecified.
    const size_t length = low | (size_t{in.Byte()} << 8);
    const uint8_t split = in.Byte();
    const std::string bytes = in.Bytes(length);
    const bool later = (control & 0x20) != 0;
    const std::string frame = later ? std::string(1, '\0') + bytes : bytes;
    ChunkAssembler& a = Assembler(s);
    const bool was_started = a.started();
    grpc::ByteBuffer b = TwoSlices(frame, split);
    absl::Status added = a.Add(&b);
    if (!added.ok()) {
      streams_[s] = Stream();
      return;
    }
    if (later) {
      if (!was_started) Fail("a frame without a head started a stream");
      streams_[s].sent += bytes;
      return;
    }
    // Taken as is: what it carried, read as the assembler reads it.
    proto::StreamHead head;
    grpc::ByteBuffer again = TwoSlices(frame, 0);
    absl::StatusOr<WireFrame> read =
        ReadFrame(again, kMaxStreamHeadBytes, "request", &head);
    if (!read.ok()) Fail("a frame taken that ReadFrame refuses");
    if ((read->head_bytes != 0) == was_started) Fail("a head out of place");
    if (!was_started) streams_[s].align = head.align();
    if (head.has_shm()) {  // Taken from the file, so it carried no payload.
      if (s % 2 == 0) Fail("a file taken by a stream that takes none");
      if (read->payload_bytes != 0) Fail("payload taken after a file's head");
      streams_[s].sent =
          std::string(head.total(), static_cast<char>(head.shm().fd()));
      return;
    }
    streams_[s].sent +=
        Flat(grpc::ByteBuffer(read->payload.data(), read->payload.size()));
  }

  void Take(int s) {
    Stream& st = streams_[s];
    if (st.in == nullptr || !st.in->complete()) return;
    grpc::ByteBuffer whole = st.in->Take();
    std::vector<grpc::Slice> slices;
    if (!st.sent.empty()) {
      if (!whole.Dump(&slices).ok() || slices.size() != 1) {
        Fail("a message is not one slice");
      }
      const uintptr_t at = reinterpret_cast<uintptr_t>(slices[0].begin());
      if (st.sent.size() > st.align && (at + st.align) % 64 != 0) {
        Fail("the largest piece is not 64-byte aligned");
      }
    }
    if (Flat(whole) != st.sent) Fail("a message is not the bytes sent");
    kept_.push_back({PeerOf(s), std::move(whole)});
    st = Stream();
  }

  // The budget holds exactly what the assemblers reserved and the kept
  // messages' buffers (whose sizes the budget knows: compared in all).
  void Check() {
    int64_t reserved[kPeers] = {};
    for (int s = 0; s < kStreams; ++s) {
      const Stream& st = streams_[s];
      if (st.in == nullptr) continue;
      const int64_t r = st.in->reserved();
      reserved[s % kPeers] += r;
      if (r > 2 * static_cast<int64_t>(st.sent.size()) + 128) {
        Fail("a stream holds more than twice what arrived");
      }
    }
    int64_t total = 0;
    for (int p = 0; p < kPeers; ++p) {
      const int64_t used = budget_->used_by(absl::StrCat("peer", p));
      if (used < reserved[p]) Fail("a peer's share counts less than it holds");
      if (used > budget_->options().max_bytes_per_peer) {
        Fail("a peer holds more than its share");
      }
      total += used;
    }
    if (total != budget_->used()) Fail("the total is not the peers' sum");
    if (budget_->used() > budget_->options().max_bytes) {
      Fail("more than the budget is held");
    }
    if (kept_.empty()) {
      int64_t live = 0;
      for (int64_t r : reserved) live += r;
      if (live != budget_->used()) Fail("bytes held by nobody");
    }
  }

  std::shared_ptr<PeerBudget> budget_;
  Stream streams_[kStreams];
  std::vector<std::pair<std::string, grpc::ByteBuffer>> kept_;
};

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ferry::Reader in(data, size);
  ferry::Run run;
  while (!in.empty()) run.Step(in);
  run.Finish();
  return 0;
}
