// RpcAgent (rpc/agent.h): membership. The backend (embedded master or
// another, membership_backend.h), joining and following it, and the
// agent's reactions: a node down, a worker replaced, this worker fenced,
// the master lost, and ending the job on its own.

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/agent.h"
#include "rpc/auth/net_util.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/embedded_backend.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<MembershipBackend>> RpcAgent::MakeBackend() {
  if (!embedded()) return options_.membership_backend(timers_);
  MembershipOptions membership = options_.membership;
  // The master does not watch itself; the others give it as long as it
  // gives them.
  membership.master_timeout = options_.rank == 0 ? absl::InfiniteDuration()
                                                 : options_.heartbeat_timeout;
  // And learn at once from its host when its process is gone.
  if (options_.rank != 0) membership.master_address = master_address_;
  return std::make_unique<EmbeddedBackend>(EmbeddedBackendOptions{
      .master = channels_->ForMembership(master_address_),
      .master_address = master_address_,
      .timers = timers_,
      .membership = membership});
}

absl::Status RpcAgent::JoinAndWatch() {
  FERRY_ASSIGN_OR_RETURN(backend_, MakeBackend());
  JoinSpec spec{
      .self = {options_.name, options_.rank, address_, self_local_address_,
               LocalHostName(), getpid(), key_->public_key()},
      .world_size = options_.world_size,
      .incarnation = incarnation_};
  FERRY_ASSIGN_OR_RETURN(directory_,
                         backend_->Join(spec, options_.startup_timeout));
  // From now on this worker's calls say who sent them, and it knows every
  // worker's key (the directory's); clients' come with membership.
  channels_->secrets().SetIdentity(WorkerNode(options_.rank));
  if (backend_->rank0_is_master()) {
    channels_->secrets().SetMaster(directory_.at(0));
  }
  for (const WorkerInfo& w : directory_.workers()) {
    if (!w.public_key.empty()) {
      authenticator_->Admit(WorkerNode(w.rank), w.public_key);
    }
  }
  authenticator_->SetLearned();
  if (directory_service_ != nullptr)
    directory_service_->SetDirectory(directory_);
  // Registered last, so the layers above (collectives, RRefs) have failed
  // their work naming worker0 before this listener starts the stop.
  if (backend_->rank0_is_master()) {
    membership_.AddListener([this](uint64_t node, const absl::Status& reason) {
      if (node == WorkerNode(0) && options_.rank != 0) OnMasterLost(reason);
    });
  }
  backend_->Follow(
      &membership_,
      {.on_fenced = [this](const absl::Status& s) { OnFenced(s); },
       .on_rejoined = [this](
                          const WorkerInfo& w,
                          uint64_t incarnation) { OnRejoined(w, incarnation); },
       .on_client =
           [this](uint64_t node, const std::string& key) {
             authenticator_->Admit(node, key);
           },
       .on_clients_end =
           [this](uint64_t end) { authenticator_->SetClientsEnd(end); }});
  StartHeartbeatProbe();
  return absl::OkStatus();
}

void RpcAgent::OnNodeDown(uint64_t node, const absl::Status& reason) {
  // Its credential names nobody any more: a fenced or departed node's late
  // calls are refused.
  authenticator_->Forget(node);
  if (caller_ != nullptr) caller_->FailNode(node, reason);
  const std::string line =
      absl::StrCat(NodeLabel(node), ": ", reason.message());
  // Workers are few and each matters; clients may come and go by the
  // thousand, so their departures are summarized.
  if (IsWorkerNode(node)) {
    ReportEvent("peer_down", line);
    const int rank = static_cast<int>(node);
    // Both backends word a graceful departure so (membership_client.cc,
    // etcd_backend.cc).
    events_->Record({.kind = absl::EndsWith(reason.message(), "left the job")
                                 ? "left"
                                 : "died",
                     .rank = rank,
                     .worker = NodeLabel(node),
                     .detail = std::string(reason.message())});
  } else {
    churn_->Departed(line);
  }
}

void RpcAgent::OnRejoined(const WorkerInfo& worker, uint64_t incarnation) {
  // The layers above hold this directory: calls, RRefs and collectives
  // reach the new incarnation's address from now on.
  absl::Status replaced = directory_.Replace(worker);
  // Its calls present credentials checked with its new key; the old
  // one's name nobody (forgotten when the old incarnation went down).
  if (replaced.ok() && !worker.public_key.empty()) {
    authenticator_->Admit(WorkerNode(worker.rank), worker.public_key);
  }
  const std::string detail =
      replaced.ok() ? absl::StrFormat("%s at %s (incarnation %016x)",
                                      worker.name, worker.address, incarnation)
                    : std::string(replaced.message());
  ReportEvent("peer_rejoined", detail);
  if (replaced.ok()) {
    events_->Record({.kind = "replaced",
                     .rank = worker.rank,
                     .worker = worker.name,
                     .detail = detail});
  }
}

void RpcAgent::OnFenced(const absl::Status& reason) {
  ReportEvent("fenced", reason.message());
  EndJob(absl::UnavailableError(
      absl::StrCat(options_.name, " was fenced: ", reason.message())));
}

void RpcAgent::OnMasterLost(const absl::Status& reason) {
  ReportEvent("master_lost",
              absl::StrCat(reason.message(),
                           "; the job is over: failing every pending call "
                           "and op, then exiting"));
  EndJob(absl::UnavailableError(absl::StrCat(
      options_.name, " stopped: the job ended: ", reason.message())));
}

void RpcAgent::EndJob(absl::Status why) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return;  // Already on its way out.
    if (exit_status_.ok()) exit_status_ = why;
  }
  // Called on a gRPC or timer thread: stopping here would wait on itself.
  RunInBackground([this, why] { StopServing(why); });
}

}  // namespace ferry
