// Fuzz target: Exchange frames → the receiving end of the collectives
// transport (collectives/transport/inbound.h) → a Mailbox, as a hostile peer
// could send them: several streams at once, interleaved with the receiver's own
// moves (ops beginning, closing, receiving) and time passing.
//
// Input: records, each a control byte and its body.
//   control & 3 == 0  a frame for stream s = (control >> 2) & 3:
//                     u16le length, a split byte, then `length` bytes, cut
//                     into two slices at split·length/256 (headers spanning
//                     slices, as gRPC may deliver them)
//   control & 3 == 1  stream s's sender ends it (Inbound::End)
//   control & 3 == 2  stream s breaks (the Inbound goes without End)
//   control & 3 == 3  the next byte b: b%4 == 0 time passes by (b>>2)·50 ms
//                     and what is stale expires; 1 Begin("world/<b>>2>");
//                     2 Close of it; 3 Receive({"world/<(b>>2)&15>",
//                     b>>6, 1}) with a landing of 4·((b>>2)&3) bytes
// A stream whose Take fails or completes is gone, as the reactor finishes it.
//
// Properties: no crash; the mailbox never counts negative bytes; and once
// every stream is gone, every begun op closed and the time-to-live passed,
// nothing is held (every byte admitted was given back or is still owed by
// a message someone will receive — none, here).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "collectives/transport/inbound.h"
#include "collectives/transport/mailbox.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "rpc/base/limits.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

constexpr int kStreams = 4;
constexpr int64_t kTtlMs = 1000;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - at_);
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

grpc::ByteBuffer TwoSlices(const std::string& bytes, uint8_t split) {
  const size_t cut = bytes.size() * split / 256;
  grpc::Slice parts[2] = {grpc::Slice(bytes.data(), cut),
                          grpc::Slice(bytes.data() + cut, bytes.size() - cut)};
  return grpc::ByteBuffer(parts, 2);
}

void Fail(const char* what) {
  fprintf(stderr, "exchange_fuzzer: %s\n", what);
  abort();
}

class Run {
 public:
  Run() : box_(Bounds(), &clock_) {}

  void Step(Reader& in) {
    const uint8_t control = in.Byte();
    const int s = (control >> 2) & 3;
    switch (control & 3) {
      case 0:
        Frame(s, in);
        break;
      case 1:
        if (streams_[s] != nullptr) (void)streams_[s]->End();
        streams_[s].reset();
        break;
      case 2:
        streams_[s].reset();
        break;
      default:
        Receiver(in.Byte());
    }
    if (box_.held_bytes() < 0) Fail("negative held bytes");
  }

  // Every stream gone, every op closed, the TTL past: nothing held.
  void Finish() {
    for (auto& s : streams_) s.reset();
    for (const std::string& op : begun_) box_.Close(op);
    clock_.Advance(absl::Milliseconds(kTtlMs + 1));
    box_.ExpireStale();
    if (box_.held_bytes() != 0) Fail("bytes still held at the end");
    if (box_.held_messages() != 0) Fail("messages still held at the end");
  }

 private:
  static Limits Bounds() {
    Limits limits;
    limits.max_mailbox_bytes = 256 << 10;
    limits.mailbox_ttl_ms = kTtlMs;
    return limits;
  }

  void Frame(int s, Reader& in) {
    const size_t length = in.Byte() | (size_t{in.Byte()} << 8);
    const uint8_t split = in.Byte();
    const std::string bytes = in.Bytes(length);
    if (streams_[s] == nullptr) {
      streams_[s] = std::make_unique<Inbound>(
          &box_,
          InboundOptions{/*self_rank=*/0, /*world_size=*/4, kTtlMs, &clock_});
    }
    absl::StatusOr<Inbound::Next> next =
        streams_[s]->Take(TwoSlices(bytes, split));
    if (!next.ok() || *next == Inbound::Next::kDone) streams_[s].reset();
  }

  void Receiver(uint8_t b) {
    const std::string op = absl::StrCat("world/", b >> 2);
    switch (b % 4) {
      case 0:
        clock_.Advance(absl::Milliseconds(50 * (b >> 2)));
        box_.ExpireStale();
        for (auto& s : streams_) {
          if (s != nullptr) s->ExpireIfStale();
        }
        break;
      case 1:
        box_.Begin(op);
        begun_.insert(op);
        break;
      case 2:
        box_.Close(op);
        begun_.erase(op);
        break;
      default: {
        // With a landing of 4·((b>>2)&3) bytes (none for 0), exactly as
        // large as its buffer, so a write past it is caught (asan).
        std::optional<TensorLanding> at;
        if (const int64_t n = 4 * ((b >> 2) & 3); n > 0) {
          TensorBuilder buffer = *TensorBuilder::Create(DType::kUInt8, {n});
          at = TensorLanding::Within(buffer, 0, n);
        }
        receives_.push_back(box_.Receive(
            {absl::StrCat("world/", (b >> 2) & 15), b >> 6, /*src=*/1},
            std::move(at)));
      }
    }
  }

  testing::ManualClock clock_;
  Mailbox box_;
  std::unique_ptr<Inbound> streams_[kStreams];
  std::set<std::string> begun_;
  std::vector<Future<Value>> receives_;
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
