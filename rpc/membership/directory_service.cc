#include "rpc/membership/directory_service.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

// Client ids the master hands out are kFirstClientNode + n (n < 2^32);
// this worker's start past them, at (rank + 1) << 32.
constexpr int kClientIdBits = 32;

}  // namespace

DirectoryService::DirectoryService(int rank, std::shared_ptr<const NodeKey> key,
                                   const Limits& limits)
    : BoundedService(ServiceOf<proto::JoinRequest>("Rendezvous"), limits,
                     absl::StrCat("worker", rank)),
      rank_(rank),
      key_(std::move(key)) {
  Bound(&DirectoryService::RegisterClient, "RegisterClient");
  // The master's: answered UNIMPLEMENTED here, once parsed within bounds.
  Bound(&DirectoryService::Join, "Join");
  Bound(&DirectoryService::Poll, "Poll");
  Bound(&DirectoryService::Barrier, "Barrier");
}

void DirectoryService::SetDirectory(Directory directory) {
  absl::MutexLock lock(&mu_);
  directory_ = std::move(directory);
}

std::string DirectoryService::SecretWith(const WorkerInfo& worker) {
  {
    absl::MutexLock lock(&mu_);
    auto it = secrets_.find(worker.rank);
    if (it != secrets_.end() && it->second.first == worker.public_key) {
      return it->second.second;
    }
  }
  // Not under mu_: an ECDH.
  absl::StatusOr<std::string> secret = key_->Agree(worker.public_key);
  if (!secret.ok()) return "";
  absl::MutexLock lock(&mu_);
  secrets_[worker.rank] = {worker.public_key, *secret};
  return *secret;
}

grpc::Status DirectoryService::Register(
    const std::string& public_key, proto::RegisterClientResponse* response) {
  std::vector<WorkerInfo> workers;
  uint64_t node = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!directory_.has_value()) {
      return grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("worker", rank_, ": the job is not formed yet"));
    }
    workers = directory_->workers();
    const uint64_t base = (static_cast<uint64_t>(rank_) + 1) << kClientIdBits;
    node = base + next_client_++;
  }
  const WorkerInfo* self = nullptr;
  for (const WorkerInfo& w : workers) {
    if (w.rank == rank_) self = &w;
  }
  const std::string own = self != nullptr ? self->public_key : "";
  response->set_node(node);
  for (const WorkerInfo& w : workers) {
    *response->add_workers() = WorkerInfoToProto(w);
    response->add_vouchers(VoucherTag(SecretWith(w), {WorkerNode(rank_), own},
                                      {WorkerNode(w.rank), w.public_key},
                                      {node, public_key}));
  }
  response->set_read_only(true);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* DirectoryService::RegisterClient(
    grpc::CallbackServerContext* context,
    const proto::RegisterClientRequest* request,
    proto::RegisterClientResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status key =
      CheckPublicKey(request->public_key(), "RegisterClient: public_key");
  reactor->Finish(key.ok() ? Register(request->public_key(), response)
                           : ToGrpcStatus(key));
  return reactor;
}

}  // namespace ferry
