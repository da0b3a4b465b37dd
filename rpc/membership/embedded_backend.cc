#include "rpc/membership/embedded_backend.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ferry {

EmbeddedBackend::EmbeddedBackend(EmbeddedBackendOptions options)
    : options_(std::move(options)) {}

EmbeddedBackend::~EmbeddedBackend() { Stop(); }

std::string EmbeddedBackend::description() const {
  return absl::StrCat("the master at ", options_.master_address);
}

absl::StatusOr<Directory> EmbeddedBackend::Join(const JoinSpec& spec,
                                                absl::Duration timeout) {
  if (spec.self.rank < 0) {
    return absl::InvalidArgumentError(
        "the embedded master cannot pick a rank: set --rank");
  }
  proto::JoinRequest request;
  *request.mutable_worker() = WorkerInfoToProto(spec.self);
  request.set_world_size(spec.world_size);
  request.set_incarnation(spec.incarnation);
  absl::StatusOr<JoinedJob> job =
      JoinJob(options_.master, options_.master_address, request, timeout,
              *options_.timers);
  if (!job.ok()) return job.status();
  absl::MutexLock lock(&mu_);
  node_ = WorkerNode(spec.self.rank);
  incarnation_ = spec.incarnation;
  identity_ = {job->credential, job->client_key};
  gone_ = std::move(job->gone);
  events_end_ = job->events_end;
  return Directory(std::move(job->workers));
}

absl::StatusOr<ClientRegistration> EmbeddedBackend::RegisterClient(
    const std::string& description, absl::Duration timeout) {
  absl::StatusOr<proto::RegisterClientResponse> registered =
      ferry::RegisterClient(options_.master, options_.master_address,
                            description, timeout, *options_.timers);
  if (!registered.ok()) return registered.status();
  std::vector<WorkerInfo> workers;
  for (const auto& w : registered->workers())
    workers.push_back(WorkerInfoFromProto(w));
  absl::MutexLock lock(&mu_);
  node_ = registered->node();
  // The master chose it (random): polls and barriers are bound to it.
  incarnation_ = registered->incarnation();
  identity_ = {registered->credential(), ""};
  gone_ = GoneNodes(registered->gone());
  events_end_ = registered->events_end();
  return ClientRegistration{registered->node(), Directory(std::move(workers)),
                            registered->read_only()};
}

NodeIdentity EmbeddedBackend::identity() const {
  absl::MutexLock lock(&mu_);
  return identity_;
}

void EmbeddedBackend::Follow(Membership* membership,
                             FollowCallbacks callbacks) {
  auto client = MembershipClient::Create(options_.master, membership,
                                         options_.timers, options_.membership);
  uint64_t node, incarnation;
  int64_t since;
  std::vector<std::pair<uint64_t, absl::Status>> gone;
  {
    absl::MutexLock lock(&mu_);
    client_ = client;
    node = node_;
    incarnation = incarnation_;
    since = events_end_;
    gone = std::move(gone_);
  }
  // Their events came before `since`: the polls will not bring them.
  for (const auto& [who, why] : gone) membership->MarkDown(who, why);
  client->Start(
      node, incarnation, since,
      {std::move(callbacks.on_fenced), std::move(callbacks.on_rejoined)});
}

std::shared_ptr<MembershipClient> EmbeddedBackend::client() const {
  absl::MutexLock lock(&mu_);
  return client_;
}

absl::Status EmbeddedBackend::Barrier(const std::string& name,
                                      absl::Duration timeout) {
  std::shared_ptr<MembershipClient> c = client();
  if (c == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("barrier ", name, ": not following membership"));
  }
  return c->Barrier(name, timeout);
}

absl::Status EmbeddedBackend::Leave(absl::Duration timeout) {
  std::shared_ptr<MembershipClient> c = client();
  if (c == nullptr) return absl::OkStatus();
  return c->Leave(timeout);
}

void EmbeddedBackend::Stop() {
  std::shared_ptr<MembershipClient> c = client();
  if (c != nullptr) c->Stop();
}

}  // namespace ferry
