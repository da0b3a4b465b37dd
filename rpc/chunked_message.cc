#include "rpc/chunked_message.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/slice.h"
#include "rpc/base/limits.h"

namespace ferry {

namespace {

constexpr size_t kHeadBytes = 16;
constexpr uint64_t kAlign = 64;

void PutU64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetU64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  }
  return v;
}

void ReleaseBuffer(void* holder) {
  delete static_cast<std::shared_ptr<char>*>(holder);
}

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  // Dump only fails on a buffer without bytes (an empty message).
  (void)bytes.Dump(&slices);
  return slices;
}

}  // namespace

std::vector<grpc::ByteBuffer> SplitIntoChunks(const grpc::ByteBuffer& message,
                                              size_t chunk_bytes) {
  const std::vector<grpc::Slice> slices = SlicesOf(message);
  // Where the largest slice (a tensor's own bytes, see wire_writer.h)
  // starts, so the receiver can align it.
  uint64_t offset = 0, largest = 0, align = 0;
  for (const grpc::Slice& s : slices) {
    if (s.size() > largest) {
      largest = s.size();
      align = offset % kAlign;
    }
    offset += s.size();
  }
  char head[kHeadBytes];
  PutU64(offset, head);
  PutU64(align, head + 8);
  std::vector<grpc::ByteBuffer> out;
  grpc::Slice head_slice(head, kHeadBytes);
  out.emplace_back(&head_slice, 1);
  // Chunks are sub-slices: references to the same memory, no copy.
  std::vector<grpc::Slice> chunk;
  size_t in_chunk = 0;
  for (const grpc::Slice& s : slices) {
    size_t at = 0;
    while (at < s.size()) {
      const size_t n = std::min(s.size() - at, chunk_bytes - in_chunk);
      chunk.push_back(s.sub(at, at + n));
      at += n;
      in_chunk += n;
      if (in_chunk == chunk_bytes) {
        out.emplace_back(chunk.data(), chunk.size());
        chunk.clear();
        in_chunk = 0;
      }
    }
  }
  if (!chunk.empty()) out.emplace_back(chunk.data(), chunk.size());
  return out;
}

void ChunkWriter::Reset(const grpc::ByteBuffer& message) {
  chunks_ = SplitIntoChunks(message, kChunkBytes);
  next_ = 0;
}

grpc::ByteBuffer* ChunkWriter::Next() {
  if (next_ > 0) chunks_[next_ - 1].Clear();
  return next_ < chunks_.size() ? &chunks_[next_++] : nullptr;
}

bool ReceiveBudget::TryTake(int64_t n) {
  int64_t used = used_.load();
  do {
    if (n > max_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + n));
  return true;
}

ChunkAssembler::ChunkAssembler(std::string what, int64_t max_bytes,
                               std::shared_ptr<ReceiveBudget> budget)
    : what_(std::move(what)),
      max_bytes_(max_bytes),
      budget_(std::move(budget)) {}

absl::Status ChunkAssembler::Head(const grpc::ByteBuffer& head) {
  if (head.Length() != kHeadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": a stream head of ", head.Length(),
                     " bytes (expected ", kHeadBytes, ")"));
  }
  char bytes[kHeadBytes];
  size_t at = 0;
  for (const grpc::Slice& s : SlicesOf(head)) {
    std::memcpy(bytes + at, s.begin(), s.size());
    at += s.size();
  }
  const uint64_t total = GetU64(bytes);
  const uint64_t align = GetU64(bytes + 8);
  if (align >= kAlign) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": stream alignment ", align, " is not below 64"));
  }
  // Bounded before anything is allocated.
  if (total > static_cast<uint64_t>(max_bytes_)) {
    return OverLimit(absl::StrCat(what_, ": a message of ", total, " bytes"),
                     HumanBytes(max_bytes_), "max_message_mb",
                     max_bytes_ / Limits::kMiB);
  }
  return Allocate(total, align);
}

absl::Status ChunkAssembler::Allocate(uint64_t total, uint64_t align) {
  const int64_t size = static_cast<int64_t>(total + 2 * kAlign);
  if (budget_ != nullptr && !budget_->TryTake(size)) {
    return OverLimit(absl::StrCat(what_, ": a message of ", total,
                                  " bytes while ", HumanBytes(budget_->used()),
                                  " are held for incoming streams"),
                     HumanBytes(budget_->max()), "grpc_memory_mb",
                     budget_->max() / Limits::kMiB);
  }
  std::shared_ptr<ReceiveBudget> budget = budget_;
  auto release = [budget, size](char* p) {
    delete[] p;
    if (budget != nullptr) budget->Give(size);
  };
  try {
    buffer_ = std::shared_ptr<char>(new char[size], release);
  } catch (const std::bad_alloc&) {
    if (budget != nullptr) budget->Give(size);
    return absl::ResourceExhaustedError(absl::StrCat(
        what_, ": out of memory for a message of ", total, " bytes"));
  }
  // The message starts so that byte `align` of it is 64-byte aligned.
  const uintptr_t base = reinterpret_cast<uintptr_t>(buffer_.get());
  data_ = buffer_.get() + (kAlign - base % kAlign) % kAlign +
          (kAlign - align) % kAlign;
  total_ = total;
  return absl::OkStatus();
}

absl::Status ChunkAssembler::Add(grpc::ByteBuffer* message) {
  if (!started()) {
    absl::Status s = Head(*message);
    message->Clear();
    return s;
  }
  const uint64_t n = message->Length();
  if (n > total_ - received_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": a chunk of ", n, " bytes after ", received_,
                     " of ", total_, " announced"));
  }
  for (const grpc::Slice& s : SlicesOf(*message)) {
    std::memcpy(data_ + received_, s.begin(), s.size());
    received_ += s.size();
  }
  message->Clear();  // Its buffers go back now, not with the stream.
  return absl::OkStatus();
}

std::string ChunkAssembler::Progress() const {
  if (!started()) return absl::StrCat(what_, ": no stream head received");
  return absl::StrCat(what_, ": ", received_, " of ", total_,
                      " bytes received");
}

grpc::ByteBuffer ChunkAssembler::Take() {
  auto* holder = new std::shared_ptr<char>(std::move(buffer_));
  grpc::Slice whole(data_, total_, ReleaseBuffer, holder);
  data_ = nullptr;
  return grpc::ByteBuffer(&whole, 1);
}

}  // namespace ferry
