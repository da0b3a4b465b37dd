#include "rpc/membership/etcd/etcd_watch.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "rpc/base/timers.h"
#include "rpc/membership/etcd/etcd_connection.h"
#include "rpc/membership/etcd/etcd_convert.h"
#include "rpc/membership/etcd/resumable_stream.h"

namespace ferry {

class WatchStream;

// What a watch needs next, in answer to one WatchResponse.
struct WatchStep {
  std::vector<EtcdEvent> events;  // To deliver.
  absl::Status end;               // Not OK: the watch is over.
  bool reconnect = false;         // The stream is useless: open another.
};

// One watch across the streams that carry it (resumable_stream.h).
class PrefixWatcher final : public ResumableStream {
 public:
  PrefixWatcher(std::shared_ptr<EtcdConnection> connection, std::string prefix,
                int64_t start_revision, EtcdWatchCallbacks callbacks);

  int64_t next_revision() const ABSL_LOCKS_EXCLUDED(mu_);
  int streams_opened() const ABSL_LOCKS_EXCLUDED(mu_);

  // From the stream.
  void OnResponse(const WatchStream* stream,
                  const etcdserverpb::WatchResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::string StreamName() const override;
  std::shared_ptr<EtcdStream> NewStreamLocked(int endpoint) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStreamGoneLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Another endpoint would say the same.
  bool IsFinal(const absl::Status& error) const override {
    return absl::IsPermissionDenied(error) || absl::IsUnauthenticated(error);
  }
  void OnEndLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WatchStep StepLocked(const etcdserverpb::WatchResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CancelReasonLocked(const etcdserverpb::WatchResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CreateTimedOut(const EtcdStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void Deliver(std::vector<EtcdEvent> events);

  // Constant after construction.
  const std::string prefix_;
  // Called only from stream callbacks, which never overlap.
  absl::AnyInvocable<void(std::vector<EtcdEvent>)> on_events_;

  int64_t next_revision_ ABSL_GUARDED_BY(mu_);
  int streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId create_timer_ ABSL_GUARDED_BY(mu_) = 0;
};

// One Watch stream carrying one watch: the create request goes out with
// the call, then responses are read one at a time and handed over.
class WatchStream final
    : public EtcdStream,
      public grpc::ClientBidiReactor<etcdserverpb::WatchRequest,
                                     etcdserverpb::WatchResponse> {
 public:
  WatchStream(std::weak_ptr<PrefixWatcher> watcher, int endpoint,
              etcdserverpb::WatchRequest create,
              std::shared_ptr<grpc::ClientContext> context)
      : EtcdStream(watcher, endpoint, std::move(context)),
        watcher_(std::move(watcher)),
        create_(std::move(create)) {}

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows with the reason.
    if (auto watcher = watcher_.lock()) watcher->OnResponse(this, response_);
    response_.Clear();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override { Done(status); }

 private:
  void Begin(const EtcdStubs& stubs) override {
    stubs.watch->async()->Watch(context(), this);
    StartWrite(&create_);
    StartRead(&response_);
    StartCall();
  }

  const std::weak_ptr<PrefixWatcher> watcher_;
  const etcdserverpb::WatchRequest create_;
  etcdserverpb::WatchResponse response_;
};

// ---- PrefixWatcher ----

PrefixWatcher::PrefixWatcher(std::shared_ptr<EtcdConnection> connection,
                             std::string prefix, int64_t start_revision,
                             EtcdWatchCallbacks callbacks)
    : ResumableStream(std::move(connection), std::move(callbacks.on_end)),
      prefix_(std::move(prefix)),
      on_events_(std::move(callbacks.on_events)),
      next_revision_(std::max<int64_t>(start_revision, 0)) {}

std::string PrefixWatcher::StreamName() const {
  return absl::StrCat("Watch ", prefix_, "*");
}

std::shared_ptr<EtcdStream> PrefixWatcher::NewStreamLocked(int endpoint) {
  etcdserverpb::WatchRequest create;
  etcdserverpb::WatchCreateRequest* c = create.mutable_create_request();
  c->set_key(prefix_);
  c->set_range_end(EtcdPrefixEnd(prefix_));
  c->set_start_revision(next_revision_);
  // Progress notices (no events) tell how far the watch has come, so a
  // resumed watch starts no earlier than it must.
  c->set_progress_notify(true);
  auto stream = std::make_shared<WatchStream>(WeakSelf<PrefixWatcher>(),
                                              endpoint, std::move(create),
                                              connection_->NewContext());
  ++streams_opened_;
  // A stream that etcd does not confirm in time is given up on.
  std::weak_ptr<PrefixWatcher> weak = WeakSelf<PrefixWatcher>();
  const EtcdStream* raw = stream.get();
  create_timer_ = connection_->timers()->RunAfter(
      connection_->options().call_timeout, [weak, raw] {
        if (auto self = weak.lock()) self->CreateTimedOut(raw);
      });
  return stream;
}

void PrefixWatcher::CreateTimedOut(const EtcdStream* stream) {
  std::shared_ptr<EtcdStream> victim;
  {
    absl::MutexLock lock(&mu_);
    create_timer_ = 0;
    if (ended_ || stream != stream_.get()) return;
    victim = stream_;
  }
  victim->Cancel();  // OnStreamDone reopens.
}

void PrefixWatcher::OnResponse(const WatchStream* stream,
                               const etcdserverpb::WatchResponse& response) {
  WatchStep step;
  std::shared_ptr<EtcdStream> current;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || stream != stream_.get()) return;
    step = StepLocked(response);
    current = stream_;
  }
  if (!step.events.empty()) Deliver(std::move(step.events));
  if (!step.end.ok()) {
    End(step.end);
  } else if (step.reconnect) {
    current->Cancel();  // OnStreamDone reopens.
  }
}

WatchStep PrefixWatcher::StepLocked(
    const etcdserverpb::WatchResponse& response) {
  WatchStep step;
  if (response.compact_revision() > 0) {
    step.end = absl::OutOfRangeError(absl::StrCat(
        "etcd ", connection_->address(stream_->endpoint()), ": ", StreamName(),
        " from revision ", next_revision_, ": history up to revision ",
        response.compact_revision(),
        " was compacted; read the prefix again and watch from there"));
    return step;
  }
  if (response.canceled()) {
    step.end = CancelReasonLocked(response);
    step.reconnect = step.end.ok();
    return step;
  }
  if (response.created()) {
    CancelTimerLocked(&create_timer_);
    failures_ = 0;
    // From now on: the first event to expect is after the current one.
    if (next_revision_ == 0) next_revision_ = response.header().revision() + 1;
  }
  for (const mvccpb::Event& event : response.events()) {
    // An event before next_revision_ was delivered by an earlier stream.
    if (event.kv().mod_revision() < next_revision_) continue;
    step.events.push_back(FromProto(event));
  }
  if (!step.events.empty()) {
    next_revision_ = step.events.back().kv.mod_revision + 1;
  } else if (!response.created()) {
    // A progress notice: every event up to its revision was sent.
    next_revision_ = std::max(next_revision_, response.header().revision() + 1);
  }
  return step;
}

// Why etcd cancelled the watch: OK when another stream may do better (the
// member lost its leader), the error to end the watch with otherwise.
absl::Status PrefixWatcher::CancelReasonLocked(
    const etcdserverpb::WatchResponse& response) {
  const std::string& reason = response.cancel_reason();
  std::string message =
      absl::StrCat("etcd ", connection_->address(stream_->endpoint()), ": ",
                   StreamName(), " cancelled by etcd: ", reason);
  if (absl::StrContains(reason, "no leader")) return absl::OkStatus();
  if (absl::StrContains(reason, "permission denied")) {
    return absl::PermissionDeniedError(message);
  }
  if (absl::StrContains(reason, "future revision")) {
    return absl::OutOfRangeError(message);
  }
  return absl::FailedPreconditionError(message);
}

void PrefixWatcher::Deliver(std::vector<EtcdEvent> events) {
  if (!gate_.Enter()) return;
  on_events_(std::move(events));
  gate_.Exit();
}

void PrefixWatcher::OnStreamGoneLocked() { CancelTimerLocked(&create_timer_); }

void PrefixWatcher::OnEndLocked() { CancelTimerLocked(&create_timer_); }

int64_t PrefixWatcher::next_revision() const {
  absl::MutexLock lock(&mu_);
  return next_revision_;
}

int PrefixWatcher::streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

// ---- EtcdWatch ----

std::unique_ptr<EtcdWatch> EtcdWatch::Start(
    std::shared_ptr<EtcdConnection> connection, std::string prefix,
    int64_t start_revision, EtcdWatchCallbacks callbacks) {
  auto watcher =
      std::make_shared<PrefixWatcher>(std::move(connection), std::move(prefix),
                                      start_revision, std::move(callbacks));
  watcher->Start();
  return std::unique_ptr<EtcdWatch>(new EtcdWatch(std::move(watcher)));
}

EtcdWatch::EtcdWatch(std::shared_ptr<PrefixWatcher> watcher)
    : watcher_(std::move(watcher)) {}

EtcdWatch::~EtcdWatch() { Stop(); }

void EtcdWatch::Stop() { watcher_->Stop(); }

int64_t EtcdWatch::next_revision() const { return watcher_->next_revision(); }

int EtcdWatch::streams_opened() const { return watcher_->streams_opened(); }

}  // namespace ferry
