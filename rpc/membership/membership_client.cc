#include "rpc/membership/membership_client.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/base/clock.h"
#include "rpc/base/status_util.h"
#include "rpc/base/timed_wait.h"
#include "rpc/wire/callback_queue.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

constexpr absl::Duration kRetryBackoff = absl::Milliseconds(100);
// Margin beyond the server-side wait, so the master answers first.
constexpr absl::Duration kReplyMargin = absl::Seconds(5);

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(WallDeadlineIn(timeout));
}

// Calls `attempt` until it returns something other than UNAVAILABLE or the
// time (on the timers' clock) is up; then DEADLINE_EXCEEDED names the
// master and the last error.
template <typename Response, typename Attempt>
absl::StatusOr<Response> RetryWhileUnavailable(Timers& timers,
                                               const std::string& master,
                                               absl::Duration timeout,
                                               Attempt attempt) {
  const Clock& clock = *timers.clock();
  const absl::Time deadline = clock.Now() + timeout;
  absl::Status last;
  while (true) {
    // No attempt without time left (its call would end at once, with a
    // bare DEADLINE_EXCEEDED that names nobody).
    const absl::Duration left = deadline - clock.Now();
    if (left <= absl::ZeroDuration()) break;
    Response response;
    absl::Status s = attempt(left, &response);
    if (s.ok()) return response;
    if (s.code() != absl::StatusCode::kUnavailable) return s;
    last = s;
    if (clock.Now() + kRetryBackoff >= deadline) break;
    if (!SleepOn(timers, kRetryBackoff)) break;  // Stopping.
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the master at ", master, " was not ready within ",
                   absl::ToInt64Milliseconds(timeout),
                   " ms (last error: ", last.message(), ")"));
}

}  // namespace

absl::StatusOr<JoinedJob> JoinJob(const std::shared_ptr<grpc::Channel>& master,
                                  const std::string& master_address,
                                  const proto::JoinRequest& request,
                                  absl::Duration timeout, Timers& timers) {
  auto stub = proto::Rendezvous::NewStub(master);
  auto response = RetryWhileUnavailable<proto::JoinResponse>(
      timers, master_address, timeout,
      [&](absl::Duration left, proto::JoinResponse* out) {
        grpc::ClientContext context;
        SetDeadline(&context, left + kReplyMargin);
        proto::JoinRequest r = request;
        r.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(left)));
        return FromGrpcStatus(stub->Join(&context, r, out));
      });
  if (!response.ok()) return response.status();
  JoinedJob job;
  for (const auto& w : response->workers())
    job.workers.push_back(WorkerInfoFromProto(w));
  job.gone = GoneNodes(response->gone());
  job.events_end = response->events_end();
  for (const proto::ClientKey& c : response->clients()) {
    job.clients.emplace_back(c.node(), c.public_key());
  }
  job.clients_end = response->clients_end();
  return job;
}

std::vector<std::pair<uint64_t, absl::Status>> GoneNodes(
    const google::protobuf::RepeatedPtrField<proto::NodeEvent>& events) {
  std::vector<std::pair<uint64_t, absl::Status>> gone;
  for (const proto::NodeEvent& e : events) {
    if (e.kind() == proto::NodeEvent::REJOINED ||
        e.kind() == proto::NodeEvent::REGISTERED) {
      continue;
    }
    gone.emplace_back(e.node(), MembershipClient::EventStatus(e));
  }
  return gone;
}

absl::StatusOr<proto::RegisterClientResponse> RegisterClient(
    const std::shared_ptr<grpc::Channel>& master,
    const std::string& master_address, const std::string& description,
    const std::string& public_key, absl::Duration timeout, Timers& timers) {
  auto stub = proto::Rendezvous::NewStub(master);
  return RetryWhileUnavailable<proto::RegisterClientResponse>(
      timers, master_address, timeout,
      [&](absl::Duration left, proto::RegisterClientResponse* out) {
        grpc::ClientContext context;
        SetDeadline(&context, std::max(left, absl::Milliseconds(1)));
        proto::RegisterClientRequest r;
        r.set_description(description);
        r.set_public_key(public_key);
        return FromGrpcStatus(stub->RegisterClient(&context, r, out));
      });
}

std::vector<Voucher> VouchersOf(const proto::RegisterClientResponse& r) {
  std::vector<Voucher> vouchers;
  for (int rank = 0; rank < r.vouchers_size() && rank < r.workers_size();
       ++rank) {
    vouchers.push_back({rank, r.workers(rank).public_key(), r.vouchers(rank)});
  }
  return vouchers;
}

struct MembershipClient::PollCall {
  grpc::ClientContext context;
  proto::PollRequest request;
  proto::PollResponse response;
};

std::shared_ptr<MembershipClient> MembershipClient::Create(
    std::shared_ptr<grpc::Channel> master, Membership* membership,
    Timers* timers, MembershipOptions options) {
  return std::make_shared<MembershipClient>(std::move(master), membership,
                                            timers, options);
}

MembershipClient::MembershipClient(std::shared_ptr<grpc::Channel> master,
                                   Membership* membership, Timers* timers,
                                   MembershipOptions options)
    : master_(std::move(master)),
      stub_(proto::Rendezvous::NewStub(master_)),
      membership_(membership),
      timers_(timers),
      options_(options),
      probe_(timers) {
  // Its polls are callback calls on a channel it was handed, perhaps not
  // from a ChannelPool: keep gRPC's callback queue from a teardown race
  // when that channel is the process's last (rpc/wire/callback_queue.h).
  HoldGrpcCallbackQueue();
}

absl::Status MembershipClient::EventStatus(const proto::NodeEvent& event) {
  if (event.kind() == proto::NodeEvent::LEFT) {
    return absl::UnavailableError(absl::StrCat(event.name(), " left the job"));
  }
  return absl::UnavailableError(
      absl::StrCat(event.name(), " died (", event.reason(), ")"));
}

void MembershipClient::Start(uint64_t node, uint64_t incarnation, int64_t since,
                             Callbacks callbacks) {
  {
    absl::MutexLock lock(&mu_);
    node_ = node;
    incarnation_ = incarnation;
    since_ = std::max<int64_t>(since, 0);
    stopped_ = false;
    last_ok_ = clock().Now();
    callbacks_ = std::move(callbacks);
    WatchMasterLocked();
  }
  IssuePoll();
}

void MembershipClient::WatchMasterLocked() {
  if (options_.master_timeout == absl::InfiniteDuration()) return;
  // Checked a few times per timeout, not only when it would run out: a
  // check that runs late tells this process it was paused (SIGSTOP, a
  // starved host) however the pause fell between checks.
  const absl::Time blame =
      std::max(last_ok_, resumed_at_) + options_.master_timeout;
  ArmWatchLocked(std::min(clock().Now() + options_.master_timeout / 4, blame));
}

void MembershipClient::ArmWatchLocked(absl::Time due) {
  watch_due_ = due;
  std::weak_ptr<MembershipClient> weak = weak_from_this();
  watch_timer_ = timers_->RunAt(due, [weak] {
    if (auto self = weak.lock()) self->CheckMaster();
  });
}

void MembershipClient::CheckMaster() {
  std::shared_ptr<PollCall> current;
  std::string last_error;
  {
    absl::MutexLock lock(&mu_);
    watch_timer_ = 0;
    if (stopped_) return;
    const absl::Time now = clock().Now();
    // Due long ago: this process did not run for a while (stopped, or
    // starved), and what the master said meanwhile may be waiting unread
    // (that this incarnation was replaced, say). Its polls get a whole
    // timeout before the master is blamed for this process's own pause.
    if (now - watch_due_ > options_.master_timeout / 4) resumed_at_ = now;
    if (now - last_ok_ < options_.master_timeout ||
        now - resumed_at_ < options_.master_timeout) {
      WatchMasterLocked();  // Contact, or a fresh chance: check again later.
      return;
    }
    current = StopForMasterLocked();
    last_error = last_error_.empty() ? "a poll still waiting" : last_error_;
  }
  GiveUpOnMaster(
      current, absl::StrCat("no contact for ",
                            absl::ToInt64Milliseconds(options_.master_timeout),
                            " ms (last: ", last_error, ")"));
}

std::shared_ptr<MembershipClient::PollCall>
MembershipClient::StopForMasterLocked() {
  stopped_ = true;
  return current_;
}

void MembershipClient::GiveUpOnMaster(const std::shared_ptr<PollCall>& current,
                                      const std::string& why) {
  // A poll stuck on a silent link would hold its slot until its deadline.
  if (current != nullptr) current->context.TryCancel();
  membership_->MarkDown(
      WorkerNode(0),
      absl::UnavailableError(absl::StrCat("worker0 (the master) died: ", why)));
}

void MembershipClient::AskIfMasterGone(absl::Time since) {
  std::weak_ptr<MembershipClient> weak = weak_from_this();
  probe_.Probe(options_.master_address, [weak, since](Listener answer) {
    if (std::shared_ptr<MembershipClient> self = weak.lock()) {
      self->MasterAnswered(since, answer);
    }
  });
}

void MembershipClient::MasterAnswered(absl::Time since, Listener answer) {
  if (answer != Listener::kRefused) return;  // The timeout decides.
  std::shared_ptr<PollCall> current;
  {
    absl::MutexLock lock(&mu_);
    // Stopped meanwhile, or a poll was answered since: the master lives.
    if (stopped_ || last_ok_ != since) return;
    current = StopForMasterLocked();
  }
  GiveUpOnMaster(current, absl::StrCat("its process is gone: its host refuses "
                                       "connections to ",
                                       options_.master_address));
}

void MembershipClient::IssuePoll() {
  auto call = std::make_shared<PollCall>();
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    call->request.set_node(node_);
    call->request.set_incarnation(incarnation_);
    call->request.set_since(since_);
    call->request.set_hold_ms(absl::ToInt64Milliseconds(options_.poll_hold));
    current_ = call;
    ++polls_active_;
  }
  // An answer late by less than master_timeout still counts as contact:
  // the poll waits that long (CheckMaster cancels it when it gives up).
  SetDeadline(&call->context,
              options_.poll_hold +
                  (options_.master_timeout == absl::InfiniteDuration()
                       ? kReplyMargin
                       : std::max(kReplyMargin, options_.master_timeout)));
  // The callback holds no reference to this client (see ChannelPool); Stop()
  // waits for it instead.
  stub_->async()->Poll(&call->context, &call->request, &call->response,
                       [this, call](grpc::Status s) {
                         OnPollDone(call, s);
                         absl::MutexLock lock(&mu_);
                         --polls_active_;
                       });
}

void MembershipClient::OnPollDone(const std::shared_ptr<PollCall>& call,
                                  const grpc::Status& status) {
  FencedCallback fenced;
  Callbacks callbacks;
  uint64_t self;
  std::optional<absl::Time> ask_since;
  {
    absl::MutexLock lock(&mu_);
    if (current_ == call) current_ = nullptr;
    if (stopped_) return;
    callbacks.on_rejoined = callbacks_.on_rejoined;
    callbacks.on_registered = callbacks_.on_registered;
    self = node_;
    if (status.ok()) {
      last_ok_ = clock().Now();
      // Numbered from `first` (older events were forgotten): never the
      // same event twice, so a death is not replayed over a later rejoin.
      since_ = std::max(since_,
                        call->response.first() + call->response.events_size());
    } else if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      stopped_ = true;
      fenced = callbacks_.on_fenced;
    } else {
      // A suspicion only: retried until CheckMaster gives up on the master,
      // or the master's host says its process is gone.
      last_error_ = absl::StrCat(StatusCodeName(FromGrpcStatus(status).code()),
                                 ": ", status.error_message());
      const absl::Time now = clock().Now();
      if (!options_.master_address.empty() && now - asked_at_ >= kAskAgain) {
        asked_at_ = now;
        ask_since = last_ok_;
      }
    }
  }
  if (ask_since.has_value()) AskIfMasterGone(*ask_since);
  // Publishing runs listeners (which fail pending work); no lock held.
  for (const proto::NodeEvent& e : call->response.events()) {
    Apply(e, self, callbacks);
  }
  if (fenced) {
    fenced(FromGrpcStatus(status));
  } else if (status.ok()) {
    IssuePoll();
  } else {
    Retry();
  }
}

void MembershipClient::Apply(const proto::NodeEvent& e, uint64_t self,
                             const Callbacks& callbacks) {
  if (e.kind() == proto::NodeEvent::REGISTERED) {
    if (callbacks.on_registered && !IsWorkerNode(e.node())) {
      callbacks.on_registered(e.node(), e.public_key());
    }
    return;
  }
  if (e.kind() != proto::NodeEvent::REJOINED) {
    membership_->MarkDown(e.node(), EventStatus(e));
    return;
  }
  // The entry must be the worker the event names (bounded before use);
  // a node taken over itself is fenced by its next poll.
  if (e.node() == self || !IsWorkerNode(e.node()) ||
      static_cast<uint64_t>(e.worker().rank()) != e.node()) {
    return;
  }
  // Its entry first, then alive: whoever sees it alive reaches the new one.
  if (callbacks.on_rejoined) {
    callbacks.on_rejoined(WorkerInfoFromProto(e.worker()), e.incarnation());
  }
  membership_->Revive(e.node());
}

void MembershipClient::Retry() {
  std::weak_ptr<MembershipClient> weak = shared_from_this();
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  retry_timer_ = timers_->RunAfter(kRetryBackoff, [weak] {
    if (auto self = weak.lock()) self->IssuePoll();
  });
}

absl::Status MembershipClient::Barrier(const std::string& name,
                                       absl::Duration timeout) {
  proto::BarrierRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_node(node_);
  }
  request.set_name(name);
  request.set_timeout_ms(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  grpc::ClientContext context;
  SetDeadline(&context, timeout + kReplyMargin);
  proto::BarrierResponse response;
  return FromGrpcStatus(stub_->Barrier(&context, request, &response));
}

absl::Status MembershipClient::Leave(absl::Duration timeout) {
  proto::PollRequest request;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::OkStatus();
    request.set_node(node_);
    request.set_incarnation(incarnation_);
    request.set_since(since_);
  }
  request.set_leaving(true);
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  proto::PollResponse response;
  grpc::Status status = stub_->Poll(&context, request, &response);
  Stop();
  return FromGrpcStatus(status);
}

void MembershipClient::Stop() {
  std::shared_ptr<PollCall> current;
  Timers::TimerId retry;
  Timers::TimerId watch;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    current = current_;
    retry = retry_timer_;
    retry_timer_ = 0;
    watch = watch_timer_;
    watch_timer_ = 0;
  }
  if (retry != 0) timers_->Cancel(retry);
  if (watch != 0) timers_->Cancel(watch);
  if (current != nullptr) current->context.TryCancel();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return polls_active_ == 0;
  };
  // A bound on gRPC's callback of the cancelled poll (a real event, which
  // comes promptly), not a protocol time.
  mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(5));
}

}  // namespace ferry
