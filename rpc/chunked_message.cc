#include "rpc/chunked_message.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/slice.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

constexpr uint64_t kAlign = 64;

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

proto::StreamHead HeadOf(const grpc::ByteBuffer& message) {
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
  proto::StreamHead head;
  head.set_total(offset);
  head.set_align(static_cast<uint32_t>(align));
  return head;
}

std::vector<grpc::ByteBuffer> SplitIntoChunks(const grpc::ByteBuffer& message,
                                              size_t chunk_bytes) {
  return SplitIntoFrames(HeadOf(message), message,
                         static_cast<int64_t>(chunk_bytes));
}

void ChunkWriter::Reset(const grpc::ByteBuffer& message) {
  Reset(HeadOf(message), message);
}

void ChunkWriter::Reset(const proto::StreamHead& head,
                        const grpc::ByteBuffer& payload) {
  chunks_ = SplitIntoFrames(head, payload, static_cast<int64_t>(kChunkBytes));
  next_ = 0;
}

grpc::ByteBuffer* ChunkWriter::Next() {
  if (next_ > 0) chunks_[next_ - 1].Clear();
  return next_ < chunks_.size() ? &chunks_[next_++] : nullptr;
}

ChunkAssembler::ChunkAssembler(std::string what, int64_t max_bytes,
                               std::shared_ptr<PeerBudget> budget,
                               std::string peer, FileReader read_file)
    : what_(std::move(what)),
      max_bytes_(max_bytes),
      budget_(std::move(budget)),
      peer_(std::move(peer)),
      read_file_(std::move(read_file)) {}

ChunkAssembler::~ChunkAssembler() { Release(); }

void ChunkAssembler::Release() {
  if (base_ == nullptr) return;
  std::free(base_);
  base_ = nullptr;
  data_ = nullptr;
  if (budget_ != nullptr) budget_->Give(peer_, capacity_);
  capacity_ = 0;
}

absl::Status ChunkAssembler::Head(const proto::StreamHead& head) {
  if (!head.has_total()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": a stream head without the message's total"));
  }
  const uint64_t total = head.total();
  const uint64_t align = head.align();
  if (align >= kAlign) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": stream alignment ", align, " is not below 64"));
  }
  // Bounded before anything is allocated, so the sums below cannot wrap.
  if (total > static_cast<uint64_t>(max_bytes_)) {
    return OverLimit(absl::StrCat(what_, ": a message of ", total, " bytes"),
                     HumanBytes(max_bytes_), "max_message_mb",
                     max_bytes_ / Limits::kMiB);
  }
  // A message no budget could ever hold is refused now, not half-way.
  if (budget_ != nullptr) {
    absl::Status fits =
        budget_->CheckFits(static_cast<int64_t>(total + 2 * kAlign));
    if (!fits.ok()) return Annotate(fits, what_);
  }
  started_ = true;
  total_ = total;
  align_ = align;
  if (head.has_reply_to()) reply_to_ = head.reply_to();
  return head.has_shm() ? ReadFile(head.shm()) : absl::OkStatus();
}

absl::Status ChunkAssembler::ReadFile(const proto::ShmRef& ref) {
  if (read_file_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what_, ": a message in a memory file from ", peer_,
        ", where none is taken (only from a peer on this host's local "
        "socket, in a file offered for it)"));
  }
  // Into the buffer frames would fill, placed and budgeted alike.
  if (absl::Status s = Reserve(total_); !s.ok()) return s;
  if (total_ > 0) {
    if (absl::Status s = read_file_(ref, total_, data_); !s.ok()) {
      return Annotate(s, what_);
    }
  }
  received_ = total_;
  return absl::OkStatus();
}

absl::Status ChunkAssembler::Reserve(uint64_t bytes) {
  const uint64_t room = capacity_ == 0 ? 0 : capacity_ - 2 * kAlign;
  if (bytes <= room) return absl::OkStatus();
  // At least double (so the moves add up to about one message), at most
  // the whole message; a first buffer of what arrived.
  const uint64_t want = std::min(total_, std::max(bytes, 2 * room));
  const int64_t capacity = static_cast<int64_t>(want + 2 * kAlign);
  const int64_t more = capacity - capacity_;
  if (budget_ != nullptr) {
    absl::Status taken = budget_->Take(peer_, more);
    if (!taken.ok()) {
      return Annotate(taken, absl::StrCat(what_, ": ", received_, " of ",
                                          total_, " bytes received"));
    }
  }
  const size_t old_offset = base_ == nullptr ? 0 : data_ - base_;
  char* grown = static_cast<char*>(std::realloc(base_, capacity));
  if (grown == nullptr) {
    if (budget_ != nullptr) budget_->Give(peer_, more);
    return absl::ResourceExhaustedError(
        absl::StrCat(what_, ": out of memory for ", want, " of a message of ",
                     total_, " bytes"));
  }
  base_ = grown;
  capacity_ = capacity;
  // The message starts so that byte `align_` of it is 64-byte aligned; a
  // moved buffer may need what arrived moved within it.
  const uintptr_t at = reinterpret_cast<uintptr_t>(base_);
  const size_t offset =
      (kAlign - at % kAlign) % kAlign + (kAlign - align_) % kAlign;
  if (offset != old_offset && received_ > 0) {
    std::memmove(base_ + offset, base_ + old_offset, received_);
  }
  data_ = base_ + offset;
  return absl::OkStatus();
}

absl::Status ChunkAssembler::Add(grpc::ByteBuffer* message) {
  proto::StreamHead head;
  absl::StatusOr<WireFrame> frame =
      ReadFrame(*message, kMaxStreamHeadBytes, what_, &head);
  if (!frame.ok()) return frame.status();
  if (!started()) {
    if (frame->head_bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": a first frame without a stream head"));
    }
    if (absl::Status s = Head(head); !s.ok()) return s;
  } else if (frame->head_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": a frame with a head after ", received_, " of ",
                     total_, " bytes (only the first has one)"));
  }
  absl::Status appended = Append(*frame);
  message->Clear();  // Its buffers go back now, not with the stream.
  return appended;
}

absl::Status ChunkAssembler::Append(const WireFrame& frame) {
  // received_ <= total_ always, so the difference cannot wrap.
  const uint64_t n = static_cast<uint64_t>(frame.payload_bytes);
  if (n > total_ - received_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": a chunk of ", n, " bytes after ", received_,
                     " of ", total_, " announced"));
  }
  if (n == 0) return absl::OkStatus();
  if (absl::Status s = Reserve(received_ + n); !s.ok()) return s;
  for (const grpc::Slice& s : frame.payload) {
    std::memcpy(data_ + received_, s.begin(), s.size());
    received_ += s.size();
  }
  return absl::OkStatus();
}

std::string ChunkAssembler::Progress() const {
  if (!started()) return absl::StrCat(what_, ": no stream head received");
  return absl::StrCat(what_, ": ", received_, " of ", total_,
                      " bytes received");
}

grpc::ByteBuffer ChunkAssembler::Take() {
  if (base_ == nullptr) {  // An empty message: nothing was allocated.
    grpc::Slice empty;
    return grpc::ByteBuffer(&empty, 1);
  }
  std::shared_ptr<PeerBudget> budget = budget_;
  auto release = [budget, peer = peer_, capacity = capacity_](char* p) {
    std::free(p);
    if (budget != nullptr) budget->Give(peer, capacity);
  };
  auto* holder = new std::shared_ptr<char>(base_, std::move(release));
  grpc::Slice whole(data_, total_, ReleaseBuffer, holder);
  base_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
  return grpc::ByteBuffer(&whole, 1);
}

}  // namespace ferry
