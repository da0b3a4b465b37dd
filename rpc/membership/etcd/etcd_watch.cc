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
#include "rpc/membership/etcd/callback_gate.h"
#include "rpc/membership/etcd/etcd_connection.h"
#include "rpc/membership/etcd/etcd_convert.h"
#include "rpc/membership/etcd/etcd_status.h"

namespace ferry {
namespace {

// How long Stop() waits for a running callback on another thread.
constexpr absl::Duration kStopWait = absl::Seconds(5);

}  // namespace

class WatchStream;

// What a watch needs next, in answer to one WatchResponse.
struct WatchStep {
  std::vector<EtcdEvent> events;  // To deliver.
  absl::Status end;               // Not OK: the watch is over.
  bool reconnect = false;         // The stream is useless: open another.
};

// One watch across the streams that carry it. Tracked by the connection
// from Start until it ended and its last stream is done.
class PrefixWatcher : public EtcdTask,
                      public std::enable_shared_from_this<PrefixWatcher> {
 public:
  PrefixWatcher(std::shared_ptr<EtcdConnection> connection, std::string prefix,
                int64_t start_revision, EtcdWatchCallbacks callbacks);

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Cancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t next_revision() const ABSL_LOCKS_EXCLUDED(mu_);
  int streams_opened() const ABSL_LOCKS_EXCLUDED(mu_);

  // From the stream.
  void OnResponse(const WatchStream* stream,
                  const etcdserverpb::WatchResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnStreamDone(const WatchStream* stream, int endpoint,
                    const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void OpenStream() ABSL_LOCKS_EXCLUDED(mu_);
  WatchStep StepLocked(const etcdserverpb::WatchResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CancelReasonLocked(const etcdserverpb::WatchResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CreateTimedOut(const WatchStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void RenewTokenThenReopen(uint64_t generation, absl::Duration pause);
  void ReopenLater(absl::Duration delay) ABSL_LOCKS_EXCLUDED(mu_);
  void Deliver(std::vector<EtcdEvent> events);
  void End(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<WatchStream> EndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeUntrack() ABSL_LOCKS_EXCLUDED(mu_);
  std::string Name() const;

  // Constant after construction.
  const std::shared_ptr<EtcdConnection> connection_;
  const std::string prefix_;
  CallbackGate gate_;
  // Called only from stream callbacks, which never overlap.
  absl::AnyInvocable<void(std::vector<EtcdEvent>)> on_events_;

  mutable absl::Mutex mu_;
  absl::AnyInvocable<void(const absl::Status&) &&> on_end_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<WatchStream> stream_ ABSL_GUARDED_BY(mu_);
  int stream_endpoint_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;  // Its token's.
  int64_t next_revision_ ABSL_GUARDED_BY(mu_);
  int failures_ ABSL_GUARDED_BY(mu_) = 0;  // Streams broken in a row.
  int streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId create_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId reopen_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool untracked_ ABSL_GUARDED_BY(mu_) = false;
};

// One Watch stream carrying one watch: the create request goes out with
// the call, then responses are read one at a time and handed over.
class WatchStream final
    : public grpc::ClientBidiReactor<etcdserverpb::WatchRequest,
                                     etcdserverpb::WatchResponse> {
 public:
  WatchStream(std::weak_ptr<PrefixWatcher> watcher, int endpoint,
              etcdserverpb::WatchRequest create,
              std::shared_ptr<grpc::ClientContext> context)
      : watcher_(std::move(watcher)),
        endpoint_(endpoint),
        create_(std::move(create)),
        context_(std::move(context)) {}

  grpc::ClientContext* context() { return context_.get(); }

  // Opens the stream; it keeps itself alive until OnDone.
  void Start(const EtcdStubs& stubs, std::shared_ptr<WatchStream> self) {
    self_ = std::move(self);
    stubs.watch->async()->Watch(context_.get(), this);
    StartWrite(&create_);
    StartRead(&response_);
    StartCall();
  }

  void Cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows with the reason.
    if (auto watcher = watcher_.lock()) watcher->OnResponse(this, response_);
    response_.Clear();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<WatchStream> self = std::move(self_);
    if (auto watcher = watcher_.lock()) {
      watcher->OnStreamDone(this, endpoint_, status);
    }
  }  // `self` may have been the last reference.

 private:
  const std::weak_ptr<PrefixWatcher> watcher_;
  const int endpoint_;
  const etcdserverpb::WatchRequest create_;
  // From EtcdConnection::NewContext; destroyed with the stream.
  const std::shared_ptr<grpc::ClientContext> context_;
  etcdserverpb::WatchResponse response_;
  std::shared_ptr<WatchStream> self_;  // Until OnDone.
};

// ---- PrefixWatcher ----

PrefixWatcher::PrefixWatcher(std::shared_ptr<EtcdConnection> connection,
                             std::string prefix, int64_t start_revision,
                             EtcdWatchCallbacks callbacks)
    : connection_(std::move(connection)),
      prefix_(std::move(prefix)),
      on_events_(std::move(callbacks.on_events)),
      on_end_(std::move(callbacks.on_end)),
      next_revision_(std::max<int64_t>(start_revision, 0)) {}

std::string PrefixWatcher::Name() const {
  return absl::StrCat("Watch ", prefix_, "*");
}

void PrefixWatcher::Start() {
  if (!connection_->Track(shared_from_this())) {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    untracked_ = true;
    return;
  }
  OpenStream();
}

void PrefixWatcher::OpenStream() {
  std::shared_ptr<WatchStream> stream;
  int endpoint;
  EtcdConnection::Token token;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    endpoint = connection_->current();
    token = connection_->token();
    etcdserverpb::WatchRequest create;
    etcdserverpb::WatchCreateRequest* c = create.mutable_create_request();
    c->set_key(prefix_);
    c->set_range_end(EtcdPrefixEnd(prefix_));
    c->set_start_revision(next_revision_);
    // Progress notices (no events) tell how far the watch has come, so a
    // resumed watch starts no earlier than it must.
    c->set_progress_notify(true);
    stream = std::make_shared<WatchStream>(weak_from_this(), endpoint,
                                           std::move(create),
                                           connection_->NewContext());
    stream_ = stream;
    stream_endpoint_ = endpoint;
    stream_generation_ = token.generation;
    ++streams_opened_;
    // A stream that etcd does not confirm in time is given up on.
    std::weak_ptr<PrefixWatcher> weak = weak_from_this();
    const WatchStream* raw = stream.get();
    create_timer_ = connection_->timers()->RunAfter(
        connection_->options().call_timeout, [weak, raw] {
          if (auto self = weak.lock()) self->CreateTimedOut(raw);
        });
  }
  connection_->Prepare(stream->context(), absl::InfiniteFuture(), token.value,
                       /*stream=*/true);
  stream->Start(connection_->stubs(endpoint), stream);
}

void PrefixWatcher::CreateTimedOut(const WatchStream* stream) {
  std::shared_ptr<WatchStream> victim;
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
  std::shared_ptr<WatchStream> current;
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
        "etcd ", connection_->address(stream_endpoint_), ": ", Name(),
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
    if (create_timer_ != 0) connection_->timers()->Cancel(create_timer_);
    create_timer_ = 0;
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
      absl::StrCat("etcd ", connection_->address(stream_endpoint_), ": ",
                   Name(), " cancelled by etcd: ", reason);
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

void PrefixWatcher::OnStreamDone(const WatchStream* stream, int endpoint,
                                 const grpc::Status& status) {
  bool ended;
  int failures = 0;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    if (stream != stream_.get()) return;
    stream_.reset();
    if (create_timer_ != 0) connection_->timers()->Cancel(create_timer_);
    create_timer_ = 0;
    ended = ended_;
    generation = stream_generation_;
    if (!ended) failures = ++failures_;
  }
  if (ended) {
    MaybeUntrack();
    return;
  }
  const absl::Duration pause = connection_->Backoff(failures - 1);
  if (IsStaleToken(status) && connection_->authenticates()) {
    RenewTokenThenReopen(generation, pause);
    return;
  }
  absl::Status error =
      EtcdError(status, connection_->address(endpoint), Name());
  if (absl::IsPermissionDenied(error) || absl::IsUnauthenticated(error)) {
    End(error);  // Another endpoint would say the same.
    return;
  }
  connection_->FailOver(endpoint);
  ReopenLater(pause);
}

// Reopens at once with a new token, or after `pause` if none came.
void PrefixWatcher::RenewTokenThenReopen(uint64_t generation,
                                         absl::Duration pause) {
  std::weak_ptr<PrefixWatcher> weak = weak_from_this();
  connection_
      ->RenewToken(generation,
                   connection_->Now() + connection_->options().call_timeout)
      .Then([weak, pause](const absl::StatusOr<Done>& renewed) {
        auto self = weak.lock();
        if (self == nullptr) return;
        if (renewed.ok()) {
          self->OpenStream();
        } else {
          self->ReopenLater(pause);
        }
      });
}

void PrefixWatcher::ReopenLater(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  std::weak_ptr<PrefixWatcher> weak = weak_from_this();
  reopen_timer_ = connection_->timers()->RunAfter(delay, [weak] {
    if (auto self = weak.lock()) self->OpenStream();
  });
}

void PrefixWatcher::End(const absl::Status& status) {
  absl::AnyInvocable<void(const absl::Status&) &&> on_end;
  std::shared_ptr<WatchStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    on_end = std::move(on_end_);
    stream = EndLocked();
  }
  if (stream != nullptr) stream->Cancel();
  if (on_end && gate_.Enter()) {
    std::move(on_end)(status);
    gate_.Exit();
  }
  MaybeUntrack();
}

std::shared_ptr<WatchStream> PrefixWatcher::EndLocked() {
  ended_ = true;
  for (Timers::TimerId* timer : {&create_timer_, &reopen_timer_}) {
    if (*timer != 0) connection_->timers()->Cancel(*timer);
    *timer = 0;
  }
  return stream_;
}

void PrefixWatcher::Cancel() {
  std::shared_ptr<WatchStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (!ended_) stream = EndLocked();
  }
  if (stream != nullptr) stream->Cancel();
  MaybeUntrack();
}

void PrefixWatcher::Stop() {
  Cancel();
  gate_.Close(kStopWait);
}

void PrefixWatcher::MaybeUntrack() {
  {
    absl::MutexLock lock(&mu_);
    if (untracked_ || !ended_ || stream_ != nullptr) return;
    untracked_ = true;
  }
  connection_->Untrack(this);
}

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
