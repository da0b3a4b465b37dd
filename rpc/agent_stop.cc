// RpcAgent (rpc/agent.h): every way the agent ends. Shutdown (collective),
// Leave (this worker alone), Stop (abrupt), a shutdown asked by RPC, the
// job ending by itself (exit_status), and the one teardown they share
// (StopServing).

#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/agent.h"
#include "rpc/base/clock.h"
#include "rpc/base/status_util.h"
#include "rpc/base/timed_wait.h"

namespace ferry {

absl::Status RpcAgent::exit_status() const {
  absl::MutexLock lock(&mu_);
  return exit_status_;
}

absl::Status RpcAgent::Drain(absl::Time deadline) {
  absl::Status status;
  const Clock& clock = *timers_->clock();
  if (!caller_->WaitIdle(TimeLeft(clock, deadline))) {
    status = absl::DeadlineExceededError(
        absl::StrCat(caller_->inflight(), " outgoing call(s) still running"));
  }
  for (AgentExtension* e : extensions_) {
    absl::Status s = e->Drain(deadline);
    if (status.ok()) status = s;
  }
  if (!call_service_->WaitIdle(TimeLeft(clock, deadline)) && status.ok()) {
    status = absl::DeadlineExceededError(absl::StrCat(
        call_service_->inflight(), " incoming call(s) still running"));
  }
  return status;
}

void RpcAgent::WaitOthersGone(absl::Time deadline) {
  // Checked every 10 ms of the timers' clock (so a test steps it); ends at
  // once if the timers are stopped.
  while (timers_->clock()->Now() < deadline) {
    int gone = 0;
    for (int r = 1; r < options_.world_size; ++r) {
      if (membership_.DownReason(WorkerNode(r)).has_value()) ++gone;
    }
    if (gone == options_.world_size - 1) return;
    if (!SleepOn(*timers_, absl::Milliseconds(10))) return;
  }
}

absl::Status RpcAgent::Shutdown(std::optional<absl::Duration> timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return absl::OkStatus();
    state_ = State::kStopping;
  }
  const absl::Duration t = timeout.value_or(options_.shutdown_timeout);
  ReportEvent("shutting_down",
              absl::StrCat("timeout_ms=", absl::ToInt64Milliseconds(t)));
  absl::Status status = Annotate(backend_->Barrier("shutdown.enter", t),
                                 "shutdown: waiting for all workers");
  absl::Status drained =
      Annotate(Drain(timers_->clock()->Now() + t), "shutdown: draining");
  if (status.ok()) status = drained;
  absl::Status agreed = Annotate(backend_->Barrier("shutdown.drained", t),
                                 "shutdown: waiting for all workers to drain");
  if (status.ok()) status = agreed;
  call_service_->StopAccepting();
  if (options_.rank == 0 && backend_->rank0_is_master()) {
    // They still need the master to leave.
    WaitOthersGone(timers_->clock()->Now() + t);
  } else {
    backend_->Leave(absl::Seconds(2)).IgnoreError();
  }
  StopServing(StoppedStatus());
  return Annotate(status, options_.name);
}

absl::Status RpcAgent::Leave() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return absl::OkStatus();
    state_ = State::kStopping;
  }
  ReportEvent("leaving", "");
  call_service_->StopAccepting();
  absl::Status status =
      Drain(timers_->clock()->Now() + options_.shutdown_timeout);
  backend_->Leave(absl::Seconds(2)).IgnoreError();
  StopServing(StoppedStatus());
  return Annotate(status, absl::StrCat(options_.name, ": leave"));
}

void RpcAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kNew) {
      // Never started: nothing to tear down, now or later (a second Stop,
      // from the destructor, must not reach extensions already destroyed).
      state_ = State::kStopped;
      teardown_started_ = true;
      return;
    }
  }
  StopServing(StoppedStatus());
}

absl::Status RpcAgent::StoppedStatus() const {
  return absl::UnavailableError(absl::StrCat(options_.name, " stopped"));
}

// Teardown order, and why:
// 1. membership client first: a node that is stopping must not see peers
//    die (or itself fenced) and react while its parts go away;
// 2. extensions (RRefs, collectives) next: they fail their waiters with
//    `stopped` while the caller and timers they use still work;
// 3. the call service aborts what it serves before the server shuts down,
//    so handlers answer with the cause instead of gRPC's bare CANCELLED;
// 4. the rendezvous (rank 0) before the server: held polls and barriers
//    are answered, not left to the server's one-second grace;
// 5. outgoing calls cancelled before the server waits, since a handler may
//    be waiting on one of them;
// 6. the executor and then the caller drain (bounded), so no task runs or
//    completion arrives after the timers stop; timers last, because every
//    step above may still cancel a timer.
void RpcAgent::StopServing(const absl::Status& stopped) {
  {
    absl::MutexLock lock(&mu_);
    if (teardown_started_) {
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return state_ == State::kStopped;
      };
      mu_.Await(absl::Condition(&stopped));
      return;
    }
    teardown_started_ = true;
    state_ = State::kStopping;
  }
  if (backend_ != nullptr) backend_->Stop();
  churn_->Stop();
  events_->Stop();
  if (heartbeat_probe_ != nullptr) heartbeat_probe_->Stop();
  for (AgentExtension* e : extensions_) e->Stop();
  if (call_service_ != nullptr) call_service_->Abort(stopped);
  if (rendezvous_ != nullptr) rendezvous_->Shutdown();
  if (caller_ != nullptr) caller_->CancelAll(stopped);
  if (server_ != nullptr) {
    server_->Shutdown(WallDeadlineIn(absl::Seconds(1)));
  }
  executor_->Stop(absl::Seconds(2));
  if (caller_ != nullptr) caller_->WaitIdle(absl::Seconds(2));
  if (owned_timers_ != nullptr) owned_timers_->Stop();
  ReportEvent("stopped", "");
  absl::MutexLock lock(&mu_);
  state_ = State::kStopped;
}

void RpcAgent::RequestShutdown(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) timeout = options_.shutdown_timeout;
  bool joining;
  {
    absl::MutexLock lock(&mu_);
    joining = state_ == State::kListening;
    // A `ferryctl down` racing a worker's join (it is listed once it
    // reserved its rank) must not be lost: Start() runs it once joined.
    if (joining) deferred_shutdown_ = timeout;
  }
  ReportEvent("shutdown_requested",
              absl::StrCat("timeout_ms=", absl::ToInt64Milliseconds(timeout),
                           joining ? " (once joined)" : ""));
  if (!joining) {
    RunInBackground([this, timeout] { Shutdown(timeout).IgnoreError(); });
  }
}

void RpcAgent::RunInBackground(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kRunning || shutdown_thread_.joinable()) return;
  shutdown_thread_ = std::thread(std::move(work));
}

bool RpcAgent::WaitStopped(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == State::kStopped;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&stopped), timeout);
}

bool RpcAgent::stopped() const {
  absl::MutexLock lock(&mu_);
  return state_ == State::kStopped;
}

}  // namespace ferry
