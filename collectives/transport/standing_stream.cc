#include "collectives/transport/standing_stream.h"

#include <string>
#include <utility>
#include <vector>

#include "proto/collectives.pb.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

// An ack as one gRPC message: empty for "delivered" (the common case costs
// no encoding), a StandingAck otherwise.
grpc::ByteBuffer EncodeAck(const absl::Status& status, bool backpressure) {
  if (status.ok()) {
    grpc::Slice empty;
    return grpc::ByteBuffer(&empty, 1);
  }
  proto::StandingAck ack;
  ack.set_code(static_cast<int>(status.code()));
  ack.set_error(std::string(status.message()));
  ack.set_backpressure(backpressure);
  const std::string bytes = ack.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// The ack's status; false if it is no ack (the receiver is at fault).
bool DecodeAck(const grpc::ByteBuffer& bytes, absl::Status* status,
               bool* backpressure) {
  *backpressure = false;
  if (!bytes.Valid() || bytes.Length() == 0) {
    *status = absl::OkStatus();
    return true;
  }
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return false;
  std::string flat;
  for (const grpc::Slice& s : slices) {
    flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  proto::StandingAck ack;
  if (!ack.ParseFromString(flat) || ack.code() <= 0 || ack.code() > 16) {
    return false;
  }
  *status =
      absl::Status(static_cast<absl::StatusCode>(ack.code()), ack.error());
  *backpressure = ack.backpressure();
  return true;
}

}  // namespace

// ---- Sending ----

std::shared_ptr<StandingSender> StandingSender::Prepare(
    grpc::GenericStub* stub, std::shared_ptr<grpc::ClientContext> context,
    Ended ended, Finished finished) {
  std::shared_ptr<StandingSender> sender(new StandingSender(
      std::move(context), std::move(ended), std::move(finished)));
  {
    absl::MutexLock lock(&sender->mu_);
    sender->self_ = sender;
  }
  stub->PrepareBidiStreamingCall(sender->context_.get(), kStandingStreamMethod,
                                 grpc::StubOptions(), sender.get());
  // A read stays outstanding for the stream's whole life; its failure is
  // how the stream's end is seen. The hold keeps OnDone (after which the
  // call is gone) from running while a write is being started on another
  // thread: it is released once the read failed and no write is starting.
  sender->AddHold();
  sender->StartRead(&sender->ack_);
  return sender;
}

bool StandingSender::Send(grpc::ByteBuffer frame, Answered answered) {
  {
    absl::MutexLock lock(&mu_);
    if (ending_) return false;
    queued_.push_back({std::move(frame), std::move(answered)});
  }
  WriteNext();
  return true;
}

bool StandingSender::ended() const {
  absl::MutexLock lock(&mu_);
  return ending_;
}

void StandingSender::WriteNext() {
  {
    absl::MutexLock lock(&mu_);
    if (ending_ || writing_ || queued_.empty()) return;
    writing_ = true;
    starting_write_ = true;
    writing_frame_ = std::move(queued_.front().frame);
    unanswered_.push_back({std::move(queued_.front().answered)});
    queued_.pop_front();
  }
  // Not under mu_: the write's reaction may run on this thread. The hold
  // keeps the call alive until StartWrite returned, even if the stream
  // ended meanwhile.
  StartWrite(&writing_frame_);
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    starting_write_ = false;
    release = ReleaseHoldLocked();
  }
  if (release) RemoveHold();
}

bool StandingSender::ReleaseHoldLocked() {
  if (!ending_ || starting_write_ || hold_released_) return false;
  hold_released_ = true;
  return true;
}

void StandingSender::StreamEnded() {
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    ending_ = true;
    release = ReleaseHoldLocked();
  }
  if (release) RemoveHold();
}

void StandingSender::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    writing_frame_.Clear();
    // A failed write: the stream is ending; OnDone answers everything.
    if (!ok) return;
    // The frame written is the last one unanswered (one write at a time),
    // unless its ack came first.
    if (!unanswered_.empty()) unanswered_.back().written = true;
  }
  WriteNext();
}

void StandingSender::OnReadDone(bool ok) {
  if (!ok) {
    StreamEnded();  // OnDone follows, once no write is starting.
    return;
  }
  absl::Status status;
  bool backpressure = false;
  const bool valid = DecodeAck(ack_, &status, &backpressure);
  ack_.Clear();
  Answered answered;
  {
    absl::MutexLock lock(&mu_);
    if (valid && !unanswered_.empty()) {
      answered = std::move(unanswered_.front().answered);
      unanswered_.pop_front();
    }
  }
  if (!answered) {
    // An ack for nothing, or no ack: the peer broke the protocol. Ending
    // the stream fails what it had not answered; the read below fails,
    // which is how the end is seen.
    context_->TryCancel();
    StartRead(&ack_);
    return;
  }
  std::move(answered)(std::move(status), backpressure,
                      /*written_unanswered=*/false);
  StartRead(&ack_);
}

void StandingSender::OnDone(const grpc::Status& status) {
  std::deque<Queued> queued;
  std::deque<Unanswered> unanswered;
  std::shared_ptr<StandingSender> self;
  {
    absl::MutexLock lock(&mu_);
    ending_ = true;
    queued.swap(queued_);
    unanswered.swap(unanswered_);
    self = std::move(self_);
  }
  const absl::Status failure = ended_(this, status);
  for (Unanswered& u : unanswered) {
    std::move(u.answered)(failure, false, u.written);
  }
  for (Queued& q : queued) std::move(q.answered)(failure, false, false);
  finished_();
}

// ---- Receiving ----

StandingReceiver::StandingReceiver(Take take) : take_(std::move(take)) {
  StartRead(&frame_);
}

void StandingReceiver::OnReadDone(bool ok) {
  if (!ok) {
    {
      absl::MutexLock lock(&mu_);
      reads_ended_ = true;
    }
    Flush();
    return;
  }
  bool backpressure = false;
  const absl::Status status = take_(frame_, &backpressure);
  frame_.Clear();
  {
    absl::MutexLock lock(&mu_);
    acks_.push_back(EncodeAck(status, backpressure));
  }
  StartRead(&frame_);
  Flush();
}

void StandingReceiver::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    writing_ack_.Clear();
    // The caller is gone: its reads end too, and nobody reads the rest.
    if (!ok) acks_.clear();
  }
  Flush();
}

void StandingReceiver::Flush() {
  bool finish = false;
  {
    absl::MutexLock lock(&mu_);
    if (writing_ || finished_) return;
    if (acks_.empty()) {
      if (!reads_ended_) return;
      finished_ = finish = true;
    } else {
      writing_ = true;
      writing_ack_ = std::move(acks_.front());
      acks_.pop_front();
    }
  }
  if (finish) {
    Finish(grpc::Status::OK);
  } else {
    StartWrite(&writing_ack_);
  }
}

}  // namespace ferry
