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
  gone_ = std::move(job->gone);
  events_end_ = job->events_end;
  clients_ = std::move(job->clients);
  clients_end_ = job->clients_end;
  return Directory(std::move(job->workers));
}

absl::StatusOr<ClientRegistration> EmbeddedBackend::RegisterClient(
    const std::string& description, const std::string& public_key,
    absl::Duration timeout) {
  absl::StatusOr<proto::RegisterClientResponse> registered =
      ferry::RegisterClient(options_.master, options_.master_address,
                            description, public_key, timeout, *options_.timers);
  if (!registered.ok()) return registered.status();
  std::vector<WorkerInfo> workers;
  for (const auto& w : registered->workers())
    workers.push_back(WorkerInfoFromProto(w));
  absl::MutexLock lock(&mu_);
  node_ = registered->node();
  // The master chose it (random): polls and barriers are bound to it.
  incarnation_ = registered->incarnation();
  gone_ = GoneNodes(registered->gone());
  events_end_ = registered->events_end();
  return ClientRegistration{registered->node(), Directory(std::move(workers)),
                            registered->read_only(), VouchersOf(*registered)};
}

void EmbeddedBackend::Follow(Membership* membership,
                             FollowCallbacks callbacks) {
  auto client = MembershipClient::Create(options_.master, membership,
                                         options_.timers, options_.membership);
  uint64_t node, incarnation, clients_end;
  int64_t since;
  std::vector<std::pair<uint64_t, absl::Status>> gone;
  std::vector<std::pair<uint64_t, std::string>> clients;
  {
    absl::MutexLock lock(&mu_);
    client_ = client;
    node = node_;
    incarnation = incarnation_;
    since = events_end_;
    gone = std::move(gone_);
    clients = std::move(clients_);
    clients_end = clients_end_;
  }
  // Their events came before `since`: the polls will not bring them.
  for (const auto& [who, why] : gone) membership->MarkDown(who, why);
  if (callbacks.on_client) {
    for (const auto& [who, key] : clients) callbacks.on_client(who, key);
  }
  if (callbacks.on_clients_end && clients_end != 0) {
    callbacks.on_clients_end(clients_end);
  }
  client->Start(
      node, incarnation, since,
      {std::move(callbacks.on_fenced), std::move(callbacks.on_rejoined),
       std::move(callbacks.on_client)});
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

absl::StatusOr<std::unique_ptr<KeyValueStore>> EmbeddedBackend::OpenStore() {
  return MasterStoreOver(options_.master, options_.master_address);
}

}  // namespace ferry
