#include "rpc/membership/directory_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/authenticator.h"

namespace ferry {

namespace {

// Client ids the master hands out are kFirstClientNode + n (n < 2^32);
// this worker's start past them, at (rank + 1) << 32.
constexpr int kClientIdBits = 32;

}  // namespace

DirectoryService::DirectoryService(int rank, const Limits& limits)
    : BoundedService(ServiceOf<proto::JoinRequest>("Rendezvous"), limits,
                     absl::StrCat("worker", rank)),
      rank_(rank) {
  Bound(&DirectoryService::RegisterClient, "RegisterClient");
  // The master's: answered UNIMPLEMENTED here, once parsed within bounds.
  Bound(&DirectoryService::Join, "Join");
  Bound(&DirectoryService::Poll, "Poll");
  Bound(&DirectoryService::Barrier, "Barrier");
}

void DirectoryService::SetDirectory(Directory directory,
                                    std::string client_key) {
  absl::MutexLock lock(&mu_);
  directory_ = std::move(directory);
  client_key_ = std::move(client_key);
}

grpc::ServerUnaryReactor* DirectoryService::RegisterClient(
    grpc::CallbackServerContext* context,
    const proto::RegisterClientRequest* /*request*/,
    proto::RegisterClientResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!directory_.has_value()) {
      status = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("worker", rank_, ": the job is not formed yet"));
    } else {
      const uint64_t base = (static_cast<uint64_t>(rank_) + 1) << kClientIdBits;
      const uint64_t node = base + next_client_++;
      response->set_node(node);
      response->set_credential(ClientCredential(client_key_, node));
      for (const WorkerInfo& w : directory_->workers())
        *response->add_workers() = WorkerInfoToProto(w);
      response->set_read_only(true);
    }
  }
  reactor->Finish(status);
  return reactor;
}

}  // namespace ferry
